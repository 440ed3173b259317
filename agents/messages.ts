// Channel-neutral transcript types shared by the model providers, the model/tool activities and
// the workflow (which imports this file as types only, and the pure helpers below): no I/O here.

/** One tool call the model asked for. `arguments` is whatever the model sent (validated later). */
export interface ToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** How a tool call ended, as the model is told. */
export type ToolResultStatus = 'accepted' | 'rejected' | 'refused' | 'failed';

/** A tool call and its final result: the workflow collects these between model turns. */
export interface ToolExchange {
  call: ToolCall;
  result: { status: ToolResultStatus; body: unknown };
}

/**
 * A tool call as recorded in tool_invocation, for a resumed run (a restart, a Temporal reset, a
 * repair) to rebuild its turn's transcript instead of asking the model again: where it stands
 * (model turn, position), what was called, and its result once settled (null: still open — the run
 * continues it by its key, never dispatching an accepted call again).
 */
export interface RecordedToolCall {
  step: number;
  ordinal: number;
  invocationId: string;
  call: ToolCall;
  result: ToolExchange['result'] | null;
}

/** One message of a model conversation, independent of any provider's wire format. */
export interface TurnMessage {
  role: 'user' | 'assistant' | 'tool';
  content: string;
  /** role 'tool': the call this result answers. */
  toolCallId?: string;
  /** role 'tool': the tool that produced it. */
  toolName?: string;
  /** role 'assistant': calls the model made in this message. */
  toolCalls?: ToolCall[];
  /** role 'tool': the structured result (sent as JSON); `content` is its compact JSON form. */
  toolResult?: unknown;
  /** role 'user': pictures given to a vision model as image parts after the text. */
  images?: { mediaType: string; data: Uint8Array }[];
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/**
 * An attachment a reply asks for (a scripted rule's `attachments`, or an accepted tool result's
 * `attachments` field): fetched from `url` through the egress policy, stored as an artifact and
 * sent as its own segment (activities/media-out.ts).
 */
export interface AttachmentSpec {
  url: string;
  /** image: sendPhoto / WeCom image; file: sendDocument / WeCom file (default: by content type) */
  kind?: 'image' | 'file';
  file_name?: string;
  caption?: string;
}

/** What one model turn decided: a final reply, or tool calls to run before the next turn. */
export type ModelDecision =
  | { kind: 'reply'; text: string; attachments?: AttachmentSpec[] }
  | { kind: 'tool_calls'; calls: ToolCall[] };

/**
 * The value the model sees for a tool result: an accepted call's body as is (the provider's
 * receipt, per the API contract); anything else wrapped with its status so the model can tell a
 * refusal or rejection from data.
 */
export function toolResultForModel(result: ToolExchange['result']): unknown {
  if (result.status === 'accepted') return result.body ?? null;
  return { status: result.status, body: result.body ?? null };
}

/** Each exchange as an assistant message carrying the call, followed by the tool's answer. */
export function exchangesToMessages(exchanges: readonly ToolExchange[]): TurnMessage[] {
  return exchanges.flatMap((x): TurnMessage[] => {
    const value = toolResultForModel(x.result);
    return [
      { role: 'assistant', content: '', toolCalls: [x.call] },
      {
        role: 'tool',
        content: JSON.stringify(value) ?? 'null',
        toolCallId: x.call.id,
        toolName: x.call.name,
        toolResult: value,
      },
    ];
  });
}
