import type { SendResult } from '../channels/send-result';
import {
  telegramDeleteMessage,
  telegramEditMessageText,
  telegramSendMessage,
} from '../channels/telegram/client';
import { type BindingSecret, bindingSecret } from '../db/queries/conversation';
import {
  draftOfReply,
  loadLiveDraft,
  moveLiveDraft,
  penalizeChat,
  reserveLiveDraft,
  takeDraftEditSlot,
} from '../db/queries/live-drafts';
import type { ClaimRow } from '../db/queries/steps';
import { lockExecutionFence } from '../db/queries/usage';
import type { LiveDraftState } from '../db/schema/live-draft';
import { type TransactionSql, withTenantTx } from '../db/tx';
import type { ActivityDeps } from './deps';
import { apiBaseOf, botTokenOf } from './typing';

// Live drafts (issue #15; binding config.live_drafts, a model profile with stream: true, Telegram):
// while the model streams, the reply so far is shown in one placeholder message, edited in place.
//
// * The first text sends the placeholder (sendMessage), reserved in live_draft first under the
//   execution's fence, so no attempt, retry or later turn of the message ever sends a second one:
//   they edit the recorded message.
// * Edits are best effort and throttled: at most one per max(1 s, the chat's pacing interval),
//   each only when the chat's shared send slot (chat_pacing) is free now and the turn still holds
//   the execution — a busy slot or a penalty skips the edit, never waits; a failed edit never
//   fails the turn. The text is cut to Telegram's 4096 UTF-16 units.
// * The committed reply stays the durable truth: delivery edits the draft to exactly the reply's
//   first text segment (sendThroughDraft, that segment's receipt is the draft's message id), or —
//   when Telegram refuses the edit — sends the segment (in a new pacing slot of the chat) and then
//   deletes the draft (best effort), all under the segment's lease.
// * A reply with no text segment sends its first segment and then deletes the draft; a message
//   that finishes with its draft still open (no segments at all, a failed delivery) deletes it
//   (finishDraft). Both best effort. A turn interrupted by newer messages (policy interrupt) is
//   re-run as the same message: its next turn edits the same draft.
// * Once a model turn returns, none of its draft calls is on the wire (see LiveDraft.stop), so
//   nothing it sent can land after delivery's edit.

/** Telegram's limit for one message's text (UTF-16 code units, which is what String#length counts). */
const TELEGRAM_TEXT_MAX = 4096;
/** Edits of one draft are at least this far apart (and at least the chat's pacing interval). */
export const DRAFT_MIN_EDIT_INTERVAL_MS = 1000;
/**
 * The timeout of every model-side draft call (placeholder send, edit, delete of a placeholder
 * nobody may keep) and of the best-effort deletes: a draft call never holds a turn, or a delivery,
 * for longer than this.
 */
export const DRAFT_CALL_TIMEOUT_MS = 5000;

export interface LiveDraft {
  /** The reply text so far (the whole text, not a delta). Never throws. */
  onText(textSoFar: string): void;
  /**
   * No more calls; resolves once the call in flight, if any, has settled. The guarantee: every
   * model-side call has its own timeout (≤ DRAFT_CALL_TIMEOUT_MS) and stop() waits for it however
   * long it takes — no shorter wait of its own — so when the turn returns no draft call of this
   * turn is on the wire, and none can land after delivery edits the draft to the reply. (A call
   * aborted by its timeout is not answered; Telegram applies a request as it receives it, so one
   * that took 5 s without reaching it is not applied later in practice.)
   */
  stop(): Promise<void>;
}

/** What a draft's text shows: cut to Telegram's limit, never inside a surrogate pair. */
export function draftText(text: string): string {
  if (text.length <= TELEGRAM_TEXT_MAX) return text;
  let cut = TELEGRAM_TEXT_MAX - 1;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1;
  return `${text.slice(0, cut)}…`;
}

/** Whether a binding shows live drafts (the option is accepted only where the channel has drafts). */
export function showsLiveDrafts(binding: { channel: string; config: Record<string, unknown> } | null) {
  return binding?.channel === 'telegram' && binding.config.live_drafts === true;
}

/**
 * A model turn's live draft, or null when the binding does not show drafts. `onVisible` is called
 * once the draft shows text (the typing indicator stops then).
 */
export function startLiveDraft(
  deps: Pick<ActivityDeps, 'sql' | 'secrets' | 'log' | 'sendTimeoutMs'>,
  p: {
    tenantId: string;
    eventId: string;
    fencingToken: number;
    binding: BindingSecret | null;
    target: { bindingId: string; chatId: string; threadId: string | null };
    /** the chat's pacing interval (activities/delivery.ts CHAT_INTERVALS_MS) */
    chatIntervalMs: number;
    onVisible: () => void;
  },
): LiveDraft | null {
  const { binding, tenantId, eventId } = p;
  if (!binding || !showsLiveDrafts(binding) || !p.target.chatId) return null;
  const token = botTokenOf(deps, tenantId, binding);
  if (!token) return null;
  const botToken: string = token;
  const apiBaseUrl = apiBaseOf(binding.config);
  const intervalMs = Math.max(DRAFT_MIN_EDIT_INTERVAL_MS, p.chatIntervalMs);
  const chat = { tenantId, bindingId: p.target.bindingId, chatId: p.target.chatId, intervalMs };
  const tx = <T>(fn: (t: TransactionSql) => Promise<T>) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, fn);
  const timeoutMs = Math.min(deps.sendTimeoutMs, DRAFT_CALL_TIMEOUT_MS);

  let phase: 'new' | 'open' | 'off' = 'new';
  let messageId: string | null = null;
  let latest = '';
  let shown = '';
  let lastCallAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let visible = false;
  const becameVisible = () => {
    if (visible) return;
    visible = true;
    p.onVisible();
  };
  const off = (why: string) => {
    phase = 'off';
    deps.log.debug({ tenantId, eventId, why }, 'live draft off for this turn');
  };
  const penalize = (ms: number) => tx((t) => penalizeChat(t, { ...chat, ms })).catch(() => undefined);

  /** The placeholder: reserved under the fence, sent, recorded; or the recorded one of an earlier attempt. */
  async function place(text: string): Promise<void> {
    const found = await tx(async (t) => {
      if (!(await lockExecutionFence(t, { tenantId, eventId, fencingToken: p.fencingToken })))
        return 'fenced' as const;
      const row = await loadLiveDraft(t, tenantId, eventId);
      if (row) return row;
      const reserved = await reserveLiveDraft(t, {
        ...chat,
        eventId,
        threadId: p.target.threadId,
        fencingToken: p.fencingToken,
      });
      return reserved ? ('reserved' as const) : ('paced' as const);
    });
    if (found === 'fenced') return off('fenced_out');
    if (found === 'paced') return; // the chat's slot is taken: try again with a later text
    if (found !== 'reserved') {
      // An earlier attempt (or turn) of this message placed it: edit that one, never a second.
      if (found.state !== 'open' || !found.provider_message_id) return off(`draft_${found.state}`);
      phase = 'open';
      messageId = found.provider_message_id;
      return edit(text);
    }
    const sent: SendResult = await telegramSendMessage({
      apiBaseUrl,
      botToken,
      chatId: p.target.chatId,
      threadId: p.target.threadId,
      text,
      timeoutMs,
    });
    if (sent.kind === 'sent') {
      // Opened only while the turn still holds the execution: a delivery never finds a draft it
      // did not know of when its segment was first claimed.
      const opened = await tx(
        async (t) =>
          (await lockExecutionFence(t, { tenantId, eventId, fencingToken: p.fencingToken })) !== null &&
          moveLiveDraft(t, {
            tenantId,
            eventId,
            from: ['reserved'],
            to: 'open',
            providerMessageId: sent.providerMessageId,
          }),
      );
      if (!opened) {
        await tx((t) => moveLiveDraft(t, { tenantId, eventId, from: ['reserved'], to: 'abandoned' }));
        await telegramDeleteMessage({
          apiBaseUrl,
          botToken,
          chatId: p.target.chatId,
          messageId: sent.providerMessageId,
          timeoutMs,
        });
        return off('fenced_out');
      }
      phase = 'open';
      messageId = sent.providerMessageId;
      shown = text;
      becameVisible();
      return;
    }
    // Not placed, or placed with an outcome nobody can confirm (then it is a stray message: Telegram
    // has no read-back): no draft for this message; delivery sends the reply as usual.
    if (sent.kind === 'retryable' && sent.retryAfterMs) await penalize(sent.retryAfterMs);
    await tx((t) => moveLiveDraft(t, { tenantId, eventId, from: ['reserved'], to: 'abandoned' }));
    off(`placeholder_${sent.reasonClass}`);
  }

  async function edit(text: string): Promise<void> {
    if (!messageId || text === shown) return;
    if (!(await tx((t) => takeDraftEditSlot(t, { ...chat, eventId, fencingToken: p.fencingToken })))) return;
    const r = await telegramEditMessageText({
      apiBaseUrl,
      botToken,
      chatId: p.target.chatId,
      messageId,
      text,
      timeoutMs,
    });
    switch (r.kind) {
      case 'edited':
        shown = text;
        becameVisible();
        return;
      case 'retryable':
        // A 429's penalty keeps every sender away (later edits find the slot penalised and skip).
        if (r.retryAfterMs) await penalize(r.retryAfterMs);
        return;
      case 'refused':
      case 'permanent':
        return off(`edit_${r.reasonClass}`);
      default: {
        const exhaustive: never = r;
        return exhaustive;
      }
    }
  }

  async function step(): Promise<void> {
    const text = draftText(latest);
    if (text.trim() === '' || text === shown) return;
    lastCallAt = performance.now();
    if (phase === 'new') await place(text);
    else if (phase === 'open') await edit(text);
  }

  function kick(): void {
    if (stopped || phase === 'off' || inFlight || timer) return;
    const wait = lastCallAt + intervalMs - performance.now();
    if (wait > 0) {
      timer = setTimeout(() => {
        timer = undefined;
        kick();
      }, wait);
      return;
    }
    inFlight = step()
      .catch((err: unknown) => {
        deps.log.debug({ tenantId, eventId, err: (err as Error).name }, 'live draft call failed');
      })
      .finally(() => {
        inFlight = null;
        if (draftText(latest) !== shown) kick();
      });
  }

  return {
    onText(textSoFar) {
      latest = textSoFar;
      kick();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      // Settled, not raced against a shorter wait: see LiveDraft.stop. kick() starts no new call
      // once stopped, so the call awaited here is the last one.
      if (inFlight) await inFlight;
    },
  };
}

/** What a segment does with its message's draft (segmentDraftOf). */
export type SegmentDraft =
  /** the reply's first text segment: delivered by editing the draft */
  | { kind: 'finish'; messageId: string }
  /**
   * the reply's first text segment after an earlier attempt's edit was refused (state replaced):
   * sent as usual, then the draft deleted
   */
  | { kind: 'replace'; messageId: string }
  /** the reply has no text segment: its first segment is sent as usual, then the draft deleted */
  | { kind: 'orphan'; messageId: string };

/**
 * The draft a claimed segment finishes or removes, if any, from the message's live_draft row (read
 * only for a Telegram binding with live_drafts). Null: the segment is sent as usual.
 */
export async function segmentDraftOf(
  deps: Pick<ActivityDeps, 'sql'>,
  tenantId: string,
  seg: ClaimRow,
): Promise<SegmentDraft | null> {
  // A draft exists only on a binding whose config has live_drafts (the claim returns the config,
  // and a binding's config never changes after it is created: no route updates it), so every
  // other segment is sent without a statement for its draft.
  if (seg.channel !== 'telegram' || seg.config?.live_drafts !== true) return null;
  const d = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (t) =>
    draftOfReply(t, { tenantId, eventId: seg.event_id, replyId: seg.reply_id }),
  );
  if (!d || d.chat_id !== seg.target.chatId) return null;
  const messageId = d.provider_message_id;
  if (d.first_text_index === null) {
    // `deleted`: an earlier attempt of this segment recorded it and may have died before the delete.
    const removes = (d.state === 'open' || d.state === 'deleted') && d.first_index === seg.segment_index;
    return removes ? { kind: 'orphan', messageId } : null;
  }
  if (d.first_text_index !== seg.segment_index) return null;
  switch (d.state) {
    case 'open':
    case 'delivered':
      return { kind: 'finish', messageId };
    case 'replaced':
      return { kind: 'replace', messageId };
    default:
      // deleted (the message finished without it, finishDraft): the segment is sent as usual
      return null;
  }
}

/**
 * Delivers a segment through its draft. `finish`: edits the draft to exactly the segment's text
 * (success or "message is not modified": sent, the receipt is the draft's id; a 429, 5xx or
 * network failure: retryable, an edit may be repeated safely). Telegram refusing the edit, a
 * `replace` or an `orphan` draft: the draft's new state is recorded, `fallback` sends the segment
 * (in a new pacing slot) and, once it is sent, the draft is deleted (best effort) — in that order,
 * so the chat never shows neither. Every step runs under the segment's lease: `holdLease(ms)`
 * before each further call makes sure the lease outlasts it (and the receipt after it).
 */
export async function sendThroughDraft(
  deps: Pick<ActivityDeps, 'sql' | 'log' | 'sendTimeoutMs'>,
  p: {
    tenantId: string;
    seg: ClaimRow;
    draft: SegmentDraft;
    secret: Record<string, unknown>;
    /** makes sure the segment's lease lasts a call of this many ms, and its receipt (holdLease) */
    holdLease: (callMs: number) => Promise<void>;
    /** sends the segment as a new message, paced and under the lease (activities/delivery.ts) */
    fallback: () => Promise<SendResult>;
  },
): Promise<SendResult> {
  const { tenantId, seg, draft } = p;
  const config = seg.config ?? {};
  const call = {
    apiBaseUrl: apiBaseOf(config),
    botToken: String(p.secret.bot_token ?? ''),
    chatId: seg.target.chatId,
    messageId: draft.messageId,
    timeoutMs: deps.sendTimeoutMs,
  };
  const move = (from: LiveDraftState[], to: 'delivered' | 'replaced' | 'deleted') =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, (t) =>
      moveLiveDraft(t, { tenantId, eventId: seg.event_id, from, to }),
    );
  switch (draft.kind) {
    case 'finish': {
      const r = await telegramEditMessageText({ ...call, text: seg.content });
      switch (r.kind) {
        case 'edited':
          await move(['open'], 'delivered');
          return { kind: 'sent', providerMessageId: draft.messageId };
        case 'retryable':
        case 'permanent':
          return r;
        case 'refused':
          deps.log.info(
            { tenantId, segmentId: seg.segment_id, reasonClass: r.reasonClass },
            'live draft edit refused; sending the segment',
          );
          break;
        default: {
          const exhaustive: never = r;
          return exhaustive;
        }
      }
      // Recorded before the sendMessage, so a later attempt never takes the draft for delivered
      // (its edit may not have landed; the new message is the reply): it sends (`replace`).
      await p.holdLease(0);
      await move(['open', 'delivered'], 'replaced');
      break;
    }
    case 'orphan':
      await p.holdLease(0);
      await move(['open'], 'deleted');
      break;
    case 'replace':
      break;
    default: {
      const exhaustive: never = draft;
      return exhaustive;
    }
  }
  const sent = await p.fallback();
  // Deleted only once the segment is in the chat: never a moment with neither. A send that did
  // not go out leaves the draft for the next attempt (`replace` / `orphan` again).
  if (sent.kind === 'sent') {
    const deleteMs = Math.min(deps.sendTimeoutMs, DRAFT_CALL_TIMEOUT_MS);
    await p.holdLease(deleteMs);
    await telegramDeleteMessage({ ...call, timeoutMs: deleteMs });
  }
  return sent;
}

/**
 * A message finished with its draft still open (no segments at all, e.g. empty_reply after a
 * streamed preamble and a tool call; or a delivery that failed before its first text segment went
 * through the draft): the draft is marked deleted, then deleted from the chat. Best effort: never
 * throws (a finished message must not fail on its draft).
 */
export async function finishDraft(
  deps: Pick<ActivityDeps, 'sql' | 'secrets' | 'log' | 'sendTimeoutMs'>,
  p: { tenantId: string; eventId: string },
): Promise<void> {
  const { tenantId, eventId } = p;
  try {
    const found = await withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, async (t) => {
      const row = await loadLiveDraft(t, tenantId, eventId);
      if (row?.state !== 'open' || !row.provider_message_id) return null;
      const binding = await bindingSecret(t, tenantId, row.binding_id, row.chat_id);
      if (!(await moveLiveDraft(t, { tenantId, eventId, from: ['open'], to: 'deleted' }))) return null;
      return { chatId: row.chat_id, messageId: row.provider_message_id, binding };
    });
    if (!found?.binding) return;
    const botToken = botTokenOf(deps, tenantId, found.binding);
    if (!botToken) return;
    await telegramDeleteMessage({
      apiBaseUrl: apiBaseOf(found.binding.config),
      botToken,
      chatId: found.chatId,
      messageId: found.messageId,
      timeoutMs: Math.min(deps.sendTimeoutMs, DRAFT_CALL_TIMEOUT_MS),
    });
  } catch (err) {
    deps.log.warn({ tenantId, eventId, err: (err as Error).message }, 'live draft not deleted');
  }
}
