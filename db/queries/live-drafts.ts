import type { TransactionSql } from 'postgres';
import type { LiveDraftState, liveDraft } from '../schema/live-draft';

// The live_draft rows (activities/live-drafts.ts) and the chat pacing a draft's calls take. A
// draft's calls go through chat_pacing like segment sends (migration 0015's segment_claim): a call
// takes the chat's slot only when it is free now, so a draft never waits for a slot and never
// makes a send wait longer than the chat's own interval.

type Draft = typeof liveDraft.$inferSelect;
/** The columns loadLiveDraft reads, typed from the schema (db/schema/live-draft.ts). */
export type LiveDraftRow = {
  binding_id: Draft['bindingId'];
  chat_id: Draft['chatId'];
  provider_message_id: Draft['providerMessageId'];
  state: Draft['state'];
};

/** The chat's send slot, taken only when free now and not under a provider's penalty. */
const takeFreeSlot = (
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; chatId: string; intervalMs: number },
) => tx`
  insert into chat_pacing as c (tenant_id, binding_id, chat_id, next_allowed_at)
  values (${p.tenantId}, ${p.bindingId}, ${p.chatId}, now() + make_interval(secs => ${p.intervalMs / 1000}::float8))
  on conflict (tenant_id, binding_id, chat_id) do update
    set next_allowed_at = excluded.next_allowed_at
    where c.next_allowed_at <= now() and (c.penalty_until is null or c.penalty_until <= now())
  returning 1 as taken`;

export async function loadLiveDraft(
  tx: TransactionSql,
  tenantId: string,
  eventId: string,
): Promise<LiveDraftRow | null> {
  const [row] = await tx<LiveDraftRow[]>`
    select binding_id, chat_id, provider_message_id, state from live_draft
    where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return row ?? null;
}

/**
 * Reserves the message's draft (state reserved, no message id) together with the chat's free send
 * slot, in the caller's fenced transaction; false when the slot is not free (try again later).
 * A message has at most one draft: the caller checked there is none, and the key refuses a second.
 */
export async function reserveLiveDraft(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    bindingId: string;
    chatId: string;
    threadId: string | null;
    fencingToken: number;
    intervalMs: number;
  },
): Promise<boolean> {
  const slot = await takeFreeSlot(tx, p);
  if (slot.length === 0) return false;
  const rows = await tx`
    insert into live_draft (tenant_id, event_id, binding_id, chat_id, thread_id, fencing_token)
    values (${p.tenantId}, ${p.eventId}, ${p.bindingId}, ${p.chatId}, ${p.threadId}, ${p.fencingToken})
    on conflict (tenant_id, event_id) do nothing
    returning 1`;
  return rows.length === 1;
}

/** Moves a draft from one of `from` to `to` (with the placeholder's id when it is first known). */
export async function moveLiveDraft(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    from: readonly LiveDraftState[];
    to: LiveDraftState;
    providerMessageId?: string;
  },
): Promise<boolean> {
  const rows = await tx`
    update live_draft
    set state = ${p.to}, updated_at = now(),
        provider_message_id = coalesce(${p.providerMessageId ?? null}::text, provider_message_id)
    where tenant_id = ${p.tenantId} and event_id = ${p.eventId} and state in ${tx(p.from as string[])}
    returning 1`;
  return rows.length === 1;
}

/**
 * The chat's free send slot for one edit of an open draft, only while the turn that edits it still
 * holds the execution (running, its fencing token): an attempt that was superseded, or a turn whose
 * reply is already committed, edits nothing. False: skip this edit.
 */
export async function takeDraftEditSlot(
  tx: TransactionSql,
  p: {
    tenantId: string;
    eventId: string;
    fencingToken: number;
    bindingId: string;
    chatId: string;
    intervalMs: number;
  },
): Promise<boolean> {
  const [held] = await tx`
    select 1 from live_draft d
    join message_event e on e.tenant_id = d.tenant_id and e.event_id = d.event_id
    where d.tenant_id = ${p.tenantId} and d.event_id = ${p.eventId} and d.state = 'open'
      and e.status = 'running' and e.execution_fencing_token = ${p.fencingToken}`;
  if (!held) return false;
  return (await takeFreeSlot(tx, p)).length === 1;
}

/** A provider's retry_after on a draft call: the chat is penalised for every sender (as segment_record does). */
export async function penalizeChat(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; chatId: string; ms: number },
): Promise<void> {
  await tx`
    insert into chat_pacing as c (tenant_id, binding_id, chat_id, next_allowed_at, penalty_until)
    values (${p.tenantId}, ${p.bindingId}, ${p.chatId}, now() + make_interval(secs => ${p.ms / 1000}::float8),
            now() + make_interval(secs => ${p.ms / 1000}::float8))
    on conflict (tenant_id, binding_id, chat_id) do update
      set next_allowed_at = greatest(c.next_allowed_at, excluded.next_allowed_at),
          penalty_until = greatest(c.penalty_until, excluded.penalty_until)`;
}

/**
 * The draft a reply's segment may finish or remove: the message's draft once placed (open, or
 * delivered / replaced / deleted by an attempt whose receipt was lost), with the index of the
 * reply's first text segment (null: none) and of its first segment.
 */
export async function draftOfReply(
  tx: TransactionSql,
  p: { tenantId: string; eventId: string; replyId: string },
): Promise<{
  provider_message_id: string;
  chat_id: string;
  state: LiveDraftState;
  first_text_index: number | null;
  first_index: number | null;
} | null> {
  const [row] = await tx<
    {
      provider_message_id: string;
      chat_id: string;
      state: LiveDraftState;
      first_text_index: number | null;
      first_index: number | null;
    }[]
  >`
    select d.provider_message_id, d.chat_id, d.state,
           (select min(o.segment_index)::int from reply_outbox o
            where o.tenant_id = d.tenant_id and o.event_id = d.event_id and o.reply_id = ${p.replyId}
              and o.segment_kind = 'text') as first_text_index,
           (select min(o.segment_index)::int from reply_outbox o
            where o.tenant_id = d.tenant_id and o.event_id = d.event_id and o.reply_id = ${p.replyId}) as first_index
    from live_draft d
    where d.tenant_id = ${p.tenantId} and d.event_id = ${p.eventId}
      and d.state in ('open', 'delivered', 'replaced', 'deleted') and d.provider_message_id is not null`;
  return row ?? null;
}

/**
 * The chat's next send slot, reserved whatever the wait (after the slot reserved last and any
 * provider penalty), as segment_claim reserves a segment's: how long to wait for it, in ms. For a
 * segment that goes out as a second message after its claimed slot was used by a draft edit.
 */
export async function reserveNextSlot(
  tx: TransactionSql,
  p: { tenantId: string; bindingId: string; chatId: string; intervalMs: number },
): Promise<number> {
  const secs = p.intervalMs / 1000;
  const [row] = await tx<{ wait_ms: number }[]>`
    insert into chat_pacing as c (tenant_id, binding_id, chat_id, next_allowed_at)
    values (${p.tenantId}, ${p.bindingId}, ${p.chatId}, now() + make_interval(secs => ${secs}::float8))
    on conflict (tenant_id, binding_id, chat_id) do update
      set next_allowed_at = greatest(c.next_allowed_at, coalesce(c.penalty_until, now()), now())
                            + make_interval(secs => ${secs}::float8)
    returning greatest(0, extract(epoch from (c.next_allowed_at - now())) * 1000 - ${p.intervalMs}::float8)::float8 as wait_ms`;
  return Math.ceil(row?.wait_ms ?? 0);
}
