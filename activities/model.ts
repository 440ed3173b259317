import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import type { TransactionSql } from 'postgres';
import {
  exchangesToMessages,
  type ModelDecision,
  type ToolExchange,
  type TurnMessage,
} from '../agents/messages';
import { callOpenAICompatible, ModelError, type PartialUsage } from '../agents/openai';
import {
  renderAttachments,
  renderTemplate,
  runScripted,
  type ScriptedConfig,
  storedScriptedConfigSchema,
} from '../agents/scripted';
import { parseRevisionTools, toolForModel } from '../agents/tools';
import type { InboundMessage } from '../channels/inbound';
import { newId } from '../db/ids';
import { insertMediaUserMemory, markMediaRejected } from '../db/queries/artifacts';
import { bindingSecret, turnTexts } from '../db/queries/conversation';
import { claimExecutionFence, eventContext, tenantSnapshot } from '../db/queries/execution';
import { loadPinnedRevision } from '../db/queries/tools';
import {
  currentSealedSecret,
  insertUsageEvent,
  loadPinnedModelProfile,
  lockExecutionFence,
  monthUsage,
  sessionHistory,
  type UsageTotals,
  usageCostMinor,
  utcMonthStart,
} from '../db/queries/usage';
import { withTenantTx } from '../db/tx';
import { StorageError } from '../lib/artifact-store';
import { secretAad } from '../lib/secret-box';
import { modelFamilyLabel, modelReasonLabel } from '../telemetry/labels';
import type { ExecutionPlan } from '../workflows/shared';
import { appendRuntimeAudit, type RuntimeAuditContext, runtimeAuditContext } from './audit-runtime';
import { CHAT_INTERVALS_MS } from './delivery';
import type { ActivityDeps } from './deps';
import { FENCED_OUT } from './failures';
import { startLiveDraft } from './live-drafts';
import { type InboundMedia, prepareInboundMedia } from './media-in';
import { attachmentSpecsOf, storeReplyAttachments } from './media-out';
import { attemptOwner, isCurrentRun } from './owner';
import { startTyping } from './typing';

export type ModelTurnResult = ModelDecision | { kind: 'budget_exhausted' };

export interface ModelTurnInput {
  tenantId: string;
  eventId: string;
  plan: ExecutionPlan;
  /** tool calls made so far in this execution, with their results, oldest first */
  exchanges: ToolExchange[];
}

/**
 * How often a remote model turn heartbeats: Temporal delivers an activity's cancellation (policy
 * interrupt: the workflow stopped waiting for this call) only in a heartbeat's response, and the
 * SDK sends them at most every 0.8 × the activity's heartbeat timeout (workflows/options.ts).
 */
const HEARTBEAT_MS = 1000;

/** The running (regular) activity's context; null in a local activity or outside one (a direct call). */
function remoteActivityContext(): Context | null {
  try {
    const ctx = Context.current();
    return ctx.info.isLocal ? null : ctx;
  } catch {
    return null;
  }
}

/** Replied messages of the session given to the model as context. */
const HISTORY_TURNS = 10;
const DEFAULT_DEADLINE_S = 60;

/** The revision's `limits` the model turn honours (the workflow reads max_steps). */
export interface RevisionLimits {
  max_steps?: number;
  max_tokens?: number;
  deadline_s?: number;
}

export function parseLimits(raw: unknown): RevisionLimits {
  const out: RevisionLimits = {};
  if (!raw || typeof raw !== 'object') return out;
  for (const k of ['max_steps', 'max_tokens', 'deadline_s'] as const) {
    const v = (raw as Record<string, unknown>)[k];
    if (typeof v === 'number' && Number.isInteger(v) && v > 0) out[k] = v;
  }
  return out;
}

/**
 * Which monthly limit is used up, if any. NULL = unlimited; 0 = nothing allowed. Checked before a
 * call, so concurrent executions may overshoot by the calls already in flight.
 */
export function exhaustedBudget(
  tenant: { monthly_token_budget: number | null; monthly_spend_limit_minor: number | null },
  usage: UsageTotals,
): 'token_budget' | 'spend_limit' | null {
  if (
    tenant.monthly_token_budget !== null &&
    usage.tokens_in + usage.tokens_out >= tenant.monthly_token_budget
  )
    return 'token_budget';
  if (tenant.monthly_spend_limit_minor !== null && usage.cost_minor >= tenant.monthly_spend_limit_minor)
    return 'spend_limit';
  return null;
}

/**
 * The deterministic agent: the first turn returns the matching rule's reply or its tool call;
 * after a tool exchange the same rule (the text is unchanged, so runScripted finds it again)
 * renders its reply with {{tool_result}} = the last result body as compact JSON.
 */
export function scriptedTurn(
  config: ScriptedConfig,
  text: string,
  exchanges: readonly ToolExchange[],
): ModelDecision {
  const step = runScripted(config, text);
  if (step.kind === 'reply') return step;
  const last = exchanges.at(-1);
  if (!last)
    return { kind: 'tool_calls', calls: [{ id: 'call_0', name: step.name, arguments: step.arguments }] };
  const toolResult = JSON.stringify(last.result.body ?? null);
  const vars = { ...step.vars, tool_result: toolResult };
  const attachments = renderAttachments(step.attachmentTemplates, vars);
  return {
    kind: 'reply',
    text: renderTemplate(step.replyTemplate, vars),
    ...(attachments ? { attachments } : {}),
  };
}

export function modelActivities(deps: ActivityDeps) {
  const tx = <T>(tenantId: string, fn: (tx: TransactionSql) => Promise<T>) =>
    withTenantTx(deps.sql, { role: 'tenant_app_writer', tenantId }, fn);

  /** A turn-level write: only while this attempt still holds the execution fence. */
  async function fenced<T>(
    tenantId: string,
    eventId: string,
    token: number,
    fn: (tx: TransactionSql) => Promise<T>,
  ) {
    return tx(tenantId, async (t) => {
      const held = await lockExecutionFence(t, { tenantId, eventId, fencingToken: token });
      if (!held) throw ApplicationFailure.nonRetryable('a newer attempt owns this execution', FENCED_OUT);
      return fn(t);
    });
  }

  /**
   * The turn's inbound media (activities/media-in.ts), with what it decides recorded under the
   * turn's fence: the user's memory entry (caption + descriptions) once stored, or the rejection
   * (outcome media_rejected, its reason, an audit entry). A store that refuses, after the S3
   * client's retries, fails the turn permanently with the store's reason class (the workflow then
   * commits the fallback reply, outcome model_failed); no artifact row is left for it.
   */
  async function inboundMediaOf(
    tenantId: string,
    eventId: string,
    plan: ExecutionPlan,
    ctx: {
      fence: { fencing_token: number; payload: InboundMessage; session_id: string };
      profile: { provider: string; vision: boolean };
      audit: RuntimeAuditContext;
    },
  ): Promise<InboundMedia> {
    const payload = ctx.fence.payload;
    if (!payload.media?.length) return { kind: 'none' };
    let inbound: InboundMedia;
    try {
      inbound = await prepareInboundMedia(deps, {
        tenantId,
        eventId,
        payload,
        plan,
        withBytes: ctx.profile.provider === 'openai_compatible' && ctx.profile.vision,
      });
    } catch (err) {
      if (!(err instanceof StorageError)) throw err;
      await fenced(tenantId, eventId, ctx.fence.fencing_token, (t) =>
        appendRuntimeAudit(t, ctx.audit, {
          action: 'media.store',
          decision: 'failed',
          errorType: err.reasonClass,
        }),
      );
      throw ApplicationFailure.nonRetryable(
        `attachment not stored: ${err.reasonClass}`,
        'ModelPermanent',
        err.reasonClass,
      );
    }
    const decided = inbound;
    await fenced(tenantId, eventId, ctx.fence.fencing_token, async (t) => {
      if (decided.kind === 'rejected') {
        await markMediaRejected(t, { tenantId, eventId, reason: decided.reason });
        await appendRuntimeAudit(t, ctx.audit, {
          action: 'media.rejected',
          decision: 'rejected',
          errorType: decided.reason,
        });
      } else if (decided.kind === 'ready') {
        await insertMediaUserMemory(t, {
          tenantId,
          eventId,
          sessionId: ctx.fence.session_id,
          userId: payload.senderId,
          content: decided.text,
        });
      }
    });
    return inbound;
  }

  /**
   * A reply's attachments (a scripted rule's, accepted tool results'): fetched and stored as
   * outbound artifacts now, under this turn, for the commit to send (activities/media-out.ts).
   */
  async function replyAttachments(
    input: ModelTurnInput,
    ctx: { fence: { fencing_token: number }; audit: RuntimeAuditContext },
    decision: ModelDecision,
  ): Promise<ModelDecision> {
    if (decision.kind !== 'reply') return decision;
    const specs = attachmentSpecsOf(decision, input.exchanges);
    if (specs.length === 0) return decision;
    try {
      await storeReplyAttachments(deps, {
        tenantId: input.tenantId,
        eventId: input.eventId,
        backendProfileId: input.plan.backendProfile.id,
        specs,
      });
    } catch (err) {
      if (!(err instanceof StorageError)) throw err;
      await fenced(input.tenantId, input.eventId, ctx.fence.fencing_token, (t) =>
        appendRuntimeAudit(t, ctx.audit, {
          action: 'media.store',
          decision: 'failed',
          errorType: err.reasonClass,
        }),
      );
      throw ApplicationFailure.nonRetryable(
        `attachment not stored: ${err.reasonClass}`,
        'ModelPermanent',
        err.reasonClass,
      );
    }
    return decision;
  }

  return {
    /**
     * One model turn of an execution: claims a new execution fence, refuses when the tenant's
     * monthly budget is used up, then asks the pinned model for a reply or tool calls. Token usage
     * and cost become an immutable usage event, written with the turn's audit entry in one
     * transaction that holds the fence; a superseded attempt whose call still answered writes its
     * usage event only (the tokens were spent) and fails FencedOut. As a regular activity it
     * heartbeats, so a cancellation (policy interrupt) reaches it: the HTTP call and the typing
     * indicator stop, and nothing answered means no usage.
     */
    async modelTurn(input: ModelTurnInput): Promise<ModelTurnResult> {
      const activity = remoteActivityContext();
      if (!activity) return turn(input, null);
      activity.heartbeat();
      const beat = setInterval(() => activity.heartbeat(), HEARTBEAT_MS);
      try {
        return await turn(input, activity.cancellationSignal);
      } finally {
        clearInterval(beat);
      }
    },
  };

  /** modelTurn's work; `cancelled` aborts the model call (and its typing indicator). */
  async function turn(input: ModelTurnInput, cancelled: AbortSignal | null): Promise<ModelTurnResult> {
    const { tenantId, eventId, plan } = input;
    const owner = attemptOwner(deps.workerId);

    const ctx = await tx(tenantId, async (t) => {
      const revision = await loadPinnedRevision(t, tenantId, plan);
      const limits = parseLimits(revision?.limits);
      const deadlineS = limits.deadline_s ?? DEFAULT_DEADLINE_S;
      const fence = await claimExecutionFence(t, {
        tenantId,
        eventId,
        owner,
        leaseSeconds: deadlineS + 30,
      });
      if (!fence) return null;
      const event = await eventContext(t, tenantId, eventId);
      // A run replaced by a repair run stops here (the claim above rolls back with the throw).
      if (event && !isCurrentRun(event.workflow_id)) {
        throw ApplicationFailure.nonRetryable(
          `message ${eventId} is worked by ${event.workflow_id}`,
          FENCED_OUT,
        );
      }
      // The plan pins ids, versions and digests: the turn runs on the pinned revision (immutable)
      // and the pinned model profile version (kept in model_profile_version), whatever was
      // published or edited since. Refuse, never run on a configuration the plan did not fix.
      const profile = await loadPinnedModelProfile(t, tenantId, plan.modelProfile);
      if (!event) throw ApplicationFailure.nonRetryable(`message ${eventId} not found`, 'NotFound');
      if (!revision || revision.content_digest !== plan.app.digest) {
        throw ApplicationFailure.nonRetryable('the pinned revision is missing or changed', 'PlanDrift');
      }
      if (
        !profile ||
        profile.content_digest !== plan.modelProfile.digest ||
        profile.provider !== plan.modelProfile.provider
      ) {
        throw ApplicationFailure.nonRetryable(
          'the pinned model profile version is missing or differs from the plan',
          'PlanDrift',
        );
      }
      const audit = runtimeAuditContext(tenantId, owner, event, plan);

      const tenant = await tenantSnapshot(t, tenantId);
      if (!tenant) throw ApplicationFailure.nonRetryable(`tenant ${tenantId} not found`, 'NotFound');
      const usage = await monthUsage(t, tenantId, utcMonthStart());
      const exhausted = exhaustedBudget(tenant, usage);
      if (exhausted) {
        await appendRuntimeAudit(t, audit, {
          action: 'model.turn',
          decision: 'budget_exhausted',
          errorType: exhausted,
          details: { tokens_used: usage.tokens_in + usage.tokens_out, cost_minor_used: usage.cost_minor },
        });
        return { kind: 'exhausted' as const };
      }

      const base = {
        kind: 'run' as const,
        fence,
        revision,
        limits,
        deadlineS,
        profile,
        audit,
        currency: tenant.billing_currency,
        // The texts this turn answers, in order (several when messages were merged into it).
        texts: await turnTexts(t, tenantId, eventId),
      };
      if (profile.provider !== 'openai_compatible')
        return { ...base, history: null, sealedKey: null, binding: null, target: null };
      return {
        ...base,
        // The typing indicator needs the binding's credentials (Telegram only).
        binding:
          event.channel === 'telegram'
            ? await bindingSecret(t, tenantId, event.binding_id, String(event.payload.chatId ?? ''))
            : null,
        target: {
          bindingId: event.binding_id,
          chatId: String(event.payload.chatId ?? ''),
          chatType: event.payload.chatType === 'group' ? ('group' as const) : ('direct' as const),
          threadId: event.payload.threadId ?? null,
        },
        history: await sessionHistory(t, {
          tenantId,
          sessionId: event.session_id,
          beforeSeq: event.event_seq,
          limit: HISTORY_TURNS,
        }),
        sealedKey: profile.api_key_secret_ref
          ? await currentSealedSecret(t, tenantId, profile.api_key_secret_ref)
          : null,
      };
    });
    if (!ctx) throw ApplicationFailure.nonRetryable('the message is no longer running', FENCED_OUT);
    if (ctx.kind === 'exhausted') return { kind: 'budget_exhausted' };

    // A media message's attachments: fetched, checked and stored as artifacts on its first turn
    // (found stored on later ones); the agent reads their descriptions after the other texts.
    // Refused ones end the turn with a clear reply.
    const inbound = await inboundMediaOf(tenantId, eventId, plan, ctx);
    if (inbound.kind === 'rejected') return { kind: 'reply', text: inbound.reply };
    const texts = inbound.kind === 'ready' ? [...ctx.texts.filter((x) => x !== ''), inbound.text] : ctx.texts;
    if (ctx.profile.provider === 'scripted') {
      const config = storedScriptedConfigSchema.parse(ctx.revision.scripted ?? {});
      return replyAttachments(input, ctx, scriptedTurn(config, texts.join('\n'), input.exchanges));
    }

    const profile = ctx.profile;
    if (!profile.base_url) {
      throw ApplicationFailure.nonRetryable('the model profile has no base_url', 'ConfigurationError');
    }
    if (profile.api_key_secret_ref && !ctx.sealedKey) {
      throw ApplicationFailure.nonRetryable(
        "the model profile's API key secret is missing",
        'ConfigurationError',
      );
    }
    const apiKey = ctx.sealedKey
      ? apiKeyFrom(
          deps.secrets.open(
            ctx.sealedKey.ciphertext,
            secretAad(tenantId, profile.api_key_secret_ref!),
            ctx.sealedKey.key_id,
          ),
        )
      : null;

    const history = ctx.history ?? { summary: null, turns: [] };
    // A vision model sees the pictures themselves; any other only their descriptions (in texts).
    const images =
      inbound.kind === 'ready' && profile.vision
        ? inbound.items.flatMap((it) =>
            it.bytes ? [{ mediaType: it.artifact.content_type, data: it.bytes }] : [],
          )
        : [];
    const messages: TurnMessage[] = [
      ...history.turns.flatMap((h): TurnMessage[] => [
        { role: 'user', content: h.user_text ?? '' },
        { role: 'assistant', content: h.reply_text },
      ]),
      ...texts.map(
        (content, i): TurnMessage => ({
          role: 'user',
          content,
          // The pictures go with the message that brought them (the last text).
          ...(i === texts.length - 1 && images.length > 0 ? { images } : {}),
        }),
      ),
      ...exchangesToMessages(input.exchanges),
    ];
    const system = history.summary
      ? `${ctx.revision.system_prompt}\n\nSummary of the conversation so far:\n${history.summary}`
      : ctx.revision.system_prompt;

    const started = performance.now();
    const callLabels = { provider: profile.provider, model_family: modelFamilyLabel(profile.model) };
    const observeCall = (outcome: string, reasonClass: string) => {
      deps.metrics?.modelCalls.inc({ ...callLabels, outcome, reason_class: modelReasonLabel(reasonClass) });
      deps.metrics?.modelCallSeconds.observe(
        { ...callLabels, outcome },
        (performance.now() - started) / 1000,
      );
    };
    const usageOf = (tokensIn: number, tokensOut: number) => ({
      usageId: newId('use'),
      tenantId,
      eventId,
      modelProfileId: profile.model_profile_id,
      tokensIn,
      tokensOut,
      costMinor: usageCostMinor(tokensIn, tokensOut, profile),
      currency: ctx.currency,
    });
    const countTokens = (inputTokens: number, outputTokens: number) => {
      deps.metrics?.modelTokens.inc({ ...callLabels, direction: 'input' }, inputTokens);
      deps.metrics?.modelTokens.inc({ ...callLabels, direction: 'output' }, outputTokens);
    };
    /**
     * The usage of a call that failed after tokens arrived: one usage event, written whether or not
     * this attempt still holds the fence (as a superseded attempt's usage below: the provider billed
     * the tokens either way), with no audit entry (the turn decided nothing). Its counts are the
     * provider's when its usage chunk came, else an estimate (agents/openai.ts estimateUsage).
     * Best effort: a database error here must not hide the call's own failure.
     */
    const recordPartialUsage = async (u: PartialUsage) => {
      countTokens(u.inputTokens, u.outputTokens);
      await tx(tenantId, (t) => insertUsageEvent(t, usageOf(u.inputTokens, u.outputTokens))).catch(
        (dbErr: unknown) =>
          deps.log.warn(
            { tenantId, eventId, err: dbErr instanceof Error ? dbErr.message : String(dbErr) },
            'usage of a failed model call not recorded',
          ),
      );
    };
    let result: Awaited<ReturnType<typeof callOpenAICompatible>>;
    const typing = ctx.target
      ? startTyping(deps, {
          tenantId,
          bindingId: ctx.target.bindingId,
          binding: ctx.binding,
          target: ctx.target,
        })
      : null;
    // Cancelled (the workflow no longer waits for this call): no more typing, the call aborted.
    const stopTyping = () => void typing?.stop();
    // A streaming call on a binding with live drafts shows the reply while it is written; typing
    // stops once the draft shows text (activities/live-drafts.ts).
    const draft =
      profile.stream && ctx.target
        ? startLiveDraft(deps, {
            tenantId,
            eventId,
            fencingToken: ctx.fence.fencing_token,
            binding: ctx.binding,
            target: ctx.target,
            chatIntervalMs: CHAT_INTERVALS_MS[`telegram/${ctx.target.chatType}`],
            onVisible: stopTyping,
          })
        : null;
    cancelled?.addEventListener('abort', stopTyping, { once: true });
    try {
      result = await callOpenAICompatible({
        baseUrl: profile.base_url,
        apiKey,
        model: profile.model,
        system,
        messages,
        tools: parseRevisionTools(ctx.revision.tools).map(toolForModel),
        parameters: profile.parameters,
        ...(ctx.limits.max_tokens ? { maxTokens: ctx.limits.max_tokens } : {}),
        timeoutMs: ctx.deadlineS * 1000,
        ...(cancelled ? { abortSignal: cancelled } : {}),
        stream: profile.stream,
        ...(draft ? { onTextDelta: (text: string) => draft.onText(text) } : {}),
      });
    } catch (err) {
      // Tokens arrived before the stream failed (dropped, timed out, cancelled): billed, so counted.
      if (err instanceof ModelError && err.partialUsage) await recordPartialUsage(err.partialUsage);
      if (cancelled?.aborted) throw new CancelledFailure('the model call was cancelled');
      const e =
        err instanceof ModelError
          ? err
          : new ModelError({
              message: 'model call failed',
              retryable: true,
              reasonClass: 'provider_error',
            });
      observeCall(e.retryable ? 'retryable_error' : 'permanent_error', e.reasonClass);
      if (e.retryable) {
        throw ApplicationFailure.create({
          message: e.message,
          type: 'ModelRetryable',
          details: [e.reasonClass],
          ...(e.retryAfterMs === undefined ? {} : { nextRetryDelay: e.retryAfterMs }),
        });
      }
      await fenced(tenantId, eventId, ctx.fence.fencing_token, (t) =>
        appendRuntimeAudit(t, ctx.audit, {
          action: 'model.turn',
          decision: 'failed',
          errorType: e.reasonClass,
          latencyMs: performance.now() - started,
        }),
      );
      throw ApplicationFailure.nonRetryable(e.message, 'ModelPermanent', e.reasonClass);
    } finally {
      cancelled?.removeEventListener('abort', stopTyping);
      // Before the reply is committed and its first segment sent: no typing, and no draft edit in
      // flight, after the reply.
      await Promise.all([typing?.stop(), draft?.stop()]);
    }
    const latencyMs = performance.now() - started;
    // A provider that ignores stream_options.include_usage sends no counts: the call is counted
    // with reason_class usage_missing, and its tokens are estimated (agents/openai.ts
    // estimateUsage), flagged in the audit entry; never recorded as a free 0/0.
    observeCall(result.kind, result.usageEstimated ? 'usage_missing' : 'none');
    if (result.usageEstimated) {
      deps.log.warn(
        { tenantId, eventId, modelProfileId: profile.model_profile_id },
        'model answered without token usage; recording an estimate',
      );
    }

    const { inputTokens, outputTokens } = result.usage;
    countTokens(inputTokens, outputTokens);
    const usage = usageOf(inputTokens, outputTokens);
    const { usageId, costMinor } = usage;
    const held = await tx(tenantId, async (t) => {
      const holds = await lockExecutionFence(t, { tenantId, eventId, fencingToken: ctx.fence.fencing_token });
      // Superseded while the model answered (a retry, a repair, an interrupt): its answer is
      // dropped and it audits nothing, but the provider billed its tokens, so budgets count them.
      await insertUsageEvent(t, usage);
      if (!holds) return false;
      await appendRuntimeAudit(t, ctx.audit, {
        action: 'model.turn',
        decision: result.kind,
        latencyMs,
        costMinor,
        details: {
          usage_id: usageId,
          tokens_in: inputTokens,
          tokens_out: outputTokens,
          ...(result.usageEstimated ? { usage_estimated: true } : {}),
          ...(result.kind === 'tool_calls' ? { tool_calls: result.calls.map((c) => c.name) } : {}),
        },
      });
      return true;
    });
    if (!held) throw ApplicationFailure.nonRetryable('a newer attempt owns this execution', FENCED_OUT);
    return result.kind === 'reply'
      ? replyAttachments(input, ctx, { kind: 'reply', text: result.text })
      : { kind: 'tool_calls', calls: result.calls };
  }
}

/**
 * A model API key secret is the key itself, or a JSON object carrying it (`api_key`, `key` or
 * `token`), however the secrets API stored the value.
 */
function apiKeyFrom(plaintext: string): string {
  try {
    const parsed: unknown = JSON.parse(plaintext);
    if (typeof parsed === 'string') return parsed;
    if (parsed && typeof parsed === 'object') {
      const o = parsed as Record<string, unknown>;
      for (const k of ['api_key', 'key', 'token']) if (typeof o[k] === 'string') return o[k] as string;
    }
  } catch {
    // not JSON: the value is the key
  }
  return plaintext;
}
