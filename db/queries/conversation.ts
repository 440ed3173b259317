import type { TransactionSql } from 'postgres';

// What a turn needs to know about its conversation (migration 0036): the texts it answers, and the
// binding it answers on (for the typing indicator).

/**
 * The texts a turn answers, oldest first: every message merged into it (policy collect /
 * interrupt, the turn's own included), or just its own.
 */
export async function turnTexts(tx: TransactionSql, tenantId: string, eventId: string): Promise<string[]> {
  const rows = await tx<{ text: string | null }[]>`
    select payload->>'text' as text from message_event
    where tenant_id = ${tenantId} and merged_into = ${eventId}
    order by event_seq`;
  if (rows.length > 0) return rows.map((r) => r.text ?? '');
  const [own] = await tx<{ text: string | null }[]>`
    select payload->>'text' as text from message_event where tenant_id = ${tenantId} and event_id = ${eventId}`;
  return [own?.text ?? ''];
}

/** A binding's config and its current sealed secret (null: no active secret). */
export interface BindingSecret {
  channel: string;
  /** the chat is under a provider's flood-control penalty (chat_pacing): send it nothing extra */
  penalized: boolean;
  config: Record<string, unknown>;
  secretRef: string;
  keyId: string;
  ciphertext: Buffer;
}

export async function bindingSecret(
  tx: TransactionSql,
  tenantId: string,
  bindingId: string,
  chatId: string,
): Promise<BindingSecret | null> {
  const [row] = await tx<
    {
      channel: string;
      config: Record<string, unknown>;
      secret_ref: string;
      key_id: string;
      ciphertext: Buffer;
      penalized: boolean;
    }[]
  >`
    select b.channel, b.config, b.secret_ref, v.key_id, v.ciphertext,
           coalesce((select p.penalty_until > now() from chat_pacing p
                     where p.tenant_id = b.tenant_id and p.binding_id = b.binding_id and p.chat_id = ${chatId}),
                    false) as penalized
    from channel_binding b
    join secret s on s.tenant_id = b.tenant_id and s.secret_ref = b.secret_ref and s.status = 'active'
    join secret_version v on v.tenant_id = s.tenant_id and v.secret_ref = s.secret_ref
                         and v.version = s.current_version
    where b.tenant_id = ${tenantId} and b.binding_id = ${bindingId}`;
  if (!row) return null;
  return {
    channel: row.channel,
    penalized: row.penalized,
    config: row.config ?? {},
    secretRef: row.secret_ref,
    keyId: row.key_id,
    ciphertext: row.ciphertext,
  };
}
