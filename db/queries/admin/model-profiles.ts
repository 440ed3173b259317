import type { TransactionSql } from 'postgres';
import { jsonb } from '../../json';
import { keysetAfter, type Page, type PageParams, sortTs, toPage } from './page';

export type ModelProvider = 'scripted' | 'openai_compatible';

/** The content of a profile: what its digest covers and what an update replaces. */
export interface ModelProfileContent {
  provider: ModelProvider;
  model: string;
  base_url: string | null;
  api_key_secret_ref: string | null;
  parameters: Record<string, unknown>;
  input_per_mtok_minor: number | null;
  output_per_mtok_minor: number | null;
  /** the model takes image parts (inbound pictures are sent to it as images) */
  vision: boolean;
  /** the model is called with streaming (live drafts need it) */
  stream: boolean;
}

export interface ModelProfileRow extends ModelProfileContent {
  model_profile_id: string;
  profile_key: string;
  status: 'active' | 'disabled';
  version: number;
  content_digest: string;
  created_at: Date;
  updated_at: Date;
  sort_ts: string;
}

const columns = (tx: TransactionSql) => tx`
  model_profile_id, profile_key, provider, model, base_url, api_key_secret_ref, parameters,
  input_per_mtok_minor, output_per_mtok_minor, vision, stream, status, version, content_digest, created_at, updated_at,
  ${sortTs(tx, 'created_at')} as sort_ts`;

export async function insertModelProfile(
  tx: TransactionSql,
  p: {
    tenantId: string;
    modelProfileId: string;
    profileKey: string;
    content: ModelProfileContent;
    digest: string;
  },
): Promise<ModelProfileRow> {
  const c = p.content;
  const [row] = await tx<ModelProfileRow[]>`
    insert into model_profile (tenant_id, model_profile_id, profile_key, provider, model, base_url,
                               api_key_secret_ref, parameters, input_per_mtok_minor, output_per_mtok_minor,
                               vision, stream, content_digest)
    values (${p.tenantId}, ${p.modelProfileId}, ${p.profileKey}, ${c.provider}, ${c.model}, ${c.base_url},
            ${c.api_key_secret_ref}, ${jsonb(tx, c.parameters)}, ${c.input_per_mtok_minor},
            ${c.output_per_mtok_minor}, ${c.vision}, ${c.stream}, ${p.digest})
    returning ${columns(tx)}`;
  await appendVersion(tx, p.tenantId, row!);
  return row!;
}

/** Replaces the content under optimistic locking; null when the version did not match. */
export async function updateModelProfile(
  tx: TransactionSql,
  p: {
    tenantId: string;
    modelProfileId: string;
    expectedVersion: number;
    content: ModelProfileContent;
    digest: string;
  },
): Promise<ModelProfileRow | null> {
  const c = p.content;
  const [row] = await tx<ModelProfileRow[]>`
    update model_profile set provider = ${c.provider}, model = ${c.model}, base_url = ${c.base_url},
      api_key_secret_ref = ${c.api_key_secret_ref}, parameters = ${jsonb(tx, c.parameters)},
      input_per_mtok_minor = ${c.input_per_mtok_minor}, output_per_mtok_minor = ${c.output_per_mtok_minor},
      vision = ${c.vision}, stream = ${c.stream}, content_digest = ${p.digest}, version = version + 1, updated_at = now()
    where tenant_id = ${p.tenantId} and model_profile_id = ${p.modelProfileId}
      and version = ${p.expectedVersion}
    returning ${columns(tx)}`;
  if (row) await appendVersion(tx, p.tenantId, row);
  return row ?? null;
}

/**
 * Keeps the content of each version (model_profile_version, append-only), in the caller's
 * transaction: executions pin a version and read it from there, so an update affects only
 * executions that start afterwards.
 */
async function appendVersion(tx: TransactionSql, tenantId: string, r: ModelProfileRow): Promise<void> {
  await tx`
    insert into model_profile_version (tenant_id, model_profile_id, version, provider, model, base_url,
                                       api_key_secret_ref, parameters, input_per_mtok_minor,
                                       output_per_mtok_minor, vision, stream, content_digest)
    values (${tenantId}, ${r.model_profile_id}, ${r.version}, ${r.provider}, ${r.model}, ${r.base_url},
            ${r.api_key_secret_ref}, ${jsonb(tx, r.parameters)}, ${r.input_per_mtok_minor},
            ${r.output_per_mtok_minor}, ${r.vision}, ${r.stream}, ${r.content_digest})`;
}

export async function getModelProfile(
  tx: TransactionSql,
  tenantId: string,
  modelProfileId: string,
): Promise<ModelProfileRow | null> {
  const rows = await tx<ModelProfileRow[]>`
    select ${columns(tx)} from model_profile where tenant_id = ${tenantId} and model_profile_id = ${modelProfileId}`;
  return rows[0] ?? null;
}

export async function listModelProfiles(
  tx: TransactionSql,
  p: { tenantId: string } & PageParams,
): Promise<Page<ModelProfileRow>> {
  const rows = await tx<ModelProfileRow[]>`
    select ${columns(tx)} from model_profile
    where tenant_id = ${p.tenantId} ${keysetAfter(tx, p.cursor, 'created_at', 'model_profile_id')}
    order by created_at desc, model_profile_id desc limit ${p.limit + 1}`;
  return toPage(rows, p.limit, (r) => ({ k: r.sort_ts, i: r.model_profile_id }));
}
