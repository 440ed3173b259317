import type { TransactionSql } from 'postgres';
import { jsonb } from '../../json';
import type { Page, PageParams } from './page';
import { toPage } from './page';

export interface RevisionRow {
  app_id: string;
  revision: number;
  model_profile_id: string;
  system_prompt: string;
  tools: unknown[];
  scripted: Record<string, unknown> | null;
  limits: Record<string, unknown>;
  /** double-texting policy: { policy, debounce_ms?, busy_reply? } */
  conversation: Record<string, unknown>;
  content_digest: string;
  created_by: string;
  created_at: Date;
}

const columns = (tx: TransactionSql) => tx`
  app_id, revision, model_profile_id, system_prompt, tools, scripted, limits, conversation, content_digest,
  created_by, created_at`;

export async function insertRevision(
  tx: TransactionSql,
  p: {
    tenantId: string;
    appId: string;
    revision: number;
    modelProfileId: string;
    systemPrompt: string;
    tools: unknown[];
    scripted: Record<string, unknown> | null;
    limits: Record<string, unknown>;
    conversation: Record<string, unknown>;
    contentDigest: string;
    createdBy: string;
  },
): Promise<RevisionRow> {
  const [row] = await tx<RevisionRow[]>`
    insert into agent_app_revision (tenant_id, app_id, revision, model_profile_id, system_prompt, tools,
                                    scripted, limits, conversation, content_digest, created_by)
    values (${p.tenantId}, ${p.appId}, ${p.revision}, ${p.modelProfileId}, ${p.systemPrompt},
            ${jsonb(tx, p.tools)}, ${p.scripted === null ? null : jsonb(tx, p.scripted)},
            ${jsonb(tx, p.limits)}, ${jsonb(tx, p.conversation)}, ${p.contentDigest}, ${p.createdBy})
    returning ${columns(tx)}`;
  return row!;
}

export async function getRevision(
  tx: TransactionSql,
  p: { tenantId: string; appId: string; revision: number },
): Promise<RevisionRow | null> {
  const rows = await tx<RevisionRow[]>`
    select ${columns(tx)} from agent_app_revision
    where tenant_id = ${p.tenantId} and app_id = ${p.appId} and revision = ${p.revision}`;
  return rows[0] ?? null;
}

/** Newest revision first; the cursor key is the revision number. */
export async function listRevisions(
  tx: TransactionSql,
  p: { tenantId: string; appId: string } & PageParams,
): Promise<Page<RevisionRow>> {
  const rows = await tx<RevisionRow[]>`
    select ${columns(tx)} from agent_app_revision
    where tenant_id = ${p.tenantId} and app_id = ${p.appId}
      ${p.cursor ? tx`and revision < ${Number(p.cursor.k)}` : tx``}
    order by revision desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: String(r.revision), i: r.app_id }));
}
