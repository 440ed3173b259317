import { type ConnectionLike, isGrpcServiceError } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
// The SDK's own converter to the wire enum (exported for registering attributes; not re-exported
// from the package index).
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTE_KEYS } from '../workflows/shared';

// Message workflows are started with Switchyard's custom search attributes; a namespace without
// them refuses every start ("Failed to start Workflow" on each webhook). Both processes check at
// startup and refuse to run with a message that says what to do; `npm run migrate` registers them.

const CALL_DEADLINE_MS = 5_000;
/** gRPC status codes a server answers when this identity may not use the operator API. */
const REFUSED = new Set([7 /* PERMISSION_DENIED */, 12 /* UNIMPLEMENTED */, 16 /* UNAUTHENTICATED */]);

/** The namespace lacks an attribute (or does not exist); the message says what to do. */
export class SearchAttributesMissing extends Error {
  override name = 'SearchAttributesMissing';
}

export type SearchAttributeCheck =
  /** every attribute is registered with its type */
  | { ok: true }
  /** answered: some are absent, or registered with another type */
  | { ok: false; missing: string[]; wrongType: string[] }
  /** the operator API refused to list them (e.g. an API key without that permission) */
  | { ok: 'unknown'; reason: string };

/** Spelling of a type in the CLIs (`--type Keyword`, `Name=Keyword`). */
const cliType = (t: SearchAttributeType) =>
  t === 'KEYWORD_LIST' ? 'KeywordList' : t.charAt(0) + t.slice(1).toLowerCase();

export async function checkSearchAttributes(
  connection: ConnectionLike,
  namespace: string,
): Promise<SearchAttributeCheck> {
  let registered: Record<string, unknown>;
  try {
    const res = await connection.withDeadline(Date.now() + CALL_DEADLINE_MS, () =>
      connection.operatorService.listSearchAttributes({ namespace }),
    );
    registered = res.customAttributes ?? {};
  } catch (err) {
    if (isGrpcServiceError(err) && REFUSED.has(err.code)) return { ok: 'unknown', reason: err.details };
    if (isGrpcServiceError(err) && err.code === 5 /* NOT_FOUND */)
      throw new SearchAttributesMissing(
        `Temporal namespace "${namespace}" does not exist: create it (\`temporal operator namespace create --namespace ${namespace}\`; on Temporal Cloud in its UI or with tcld), then register Switchyard's search attributes with \`npm run migrate\`.`,
      );
    throw err;
  }
  const missing: string[] = [];
  const wrongType: string[] = [];
  for (const key of SEARCH_ATTRIBUTE_KEYS) {
    const found = registered[key.name];
    if (found === undefined) missing.push(key.name);
    else if (found !== encodeSearchAttributeIndexedValueType(key.type)) wrongType.push(key.name);
  }
  return missing.length + wrongType.length === 0 ? { ok: true } : { ok: false, missing, wrongType };
}

/**
 * What an operator reads when the check fails: which attributes, and the commands that fix it.
 * `refused`: why the server refused `npm run migrate`'s registration (then it is not advised).
 */
export function missingSearchAttributesMessage(
  namespace: string,
  check: { missing: string[]; wrongType: string[] },
  refused?: string,
): string {
  const typeOf = (name: string) => cliType(SEARCH_ATTRIBUTE_KEYS.find((k) => k.name === name)!.type);
  const problems = [];
  if (check.missing.length > 0)
    problems.push(
      `lacks the search attributes ${check.missing.map((n) => `${n} (${typeOf(n)})`).join(', ')}`,
    );
  if (check.wrongType.length > 0)
    problems.push(
      `has ${check.wrongType.map((n) => `${n} with another type than ${typeOf(n)}`).join(', ')} (an operator must remove and re-create it)`,
    );
  const head = `Temporal namespace "${namespace}" ${problems.join(' and ')}: Switchyard's workflows cannot start without them.`;
  if (check.missing.length === 0) return head;
  const byType = new Map<string, string[]>();
  for (const n of check.missing) byType.set(typeOf(n), [...(byType.get(typeOf(n)) ?? []), n]);
  const cli = [...byType]
    .map(
      ([type, names]) =>
        `temporal operator search-attribute create --namespace ${namespace} ${names.map((n) => `--name ${n}`).join(' ')} --type ${type}`,
    )
    .join(' && ');
  const cloud = `tcld namespace search-attributes add --namespace ${namespace} ${check.missing
    .map((n) => `--search-attribute ${n}=${typeOf(n)}`)
    .join(' ')}`;
  const how =
    refused === undefined
      ? `Register them with \`npm run migrate\` (TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE set), or \`${cli}\`, or on Temporal Cloud \`${cloud}\`.`
      : `Temporal refused to register them (${refused}): run \`${cli}\` with an identity allowed to, or on Temporal Cloud \`${cloud}\`.`;
  return `${head} ${how}`;
}

/**
 * Startup check: throws SearchAttributesMissing (with the message above) when the namespace lacks
 * an attribute; returns the reason when the server would not say (the caller logs a warning and
 * starts: a wrong guess would block a deployment whose attributes are fine).
 */
export async function requireSearchAttributes(
  connection: ConnectionLike,
  namespace: string,
): Promise<{ verified: true } | { verified: false; reason: string }> {
  const check = await checkSearchAttributes(connection, namespace);
  if (check.ok === 'unknown') return { verified: false, reason: check.reason };
  if (!check.ok) throw new SearchAttributesMissing(missingSearchAttributesMessage(namespace, check));
  return { verified: true };
}

export type RegisterResult =
  | { outcome: 'present' }
  | { outcome: 'registered'; names: string[] }
  /**
   * some are still missing (the server refused to register them) or of another type (not ours to
   * change: removing an attribute is an operator's decision); `message` says what to do
   */
  | { outcome: 'refused'; message: string }
  /** the server would neither list nor register them: nothing is known */
  | { outcome: 'unknown'; message: string };

const REGISTER_WAIT_MS = 15_000;

/**
 * Registers the attributes the namespace lacks (what `npm run migrate` does when TEMPORAL_ADDRESS
 * is set). Idempotent: present ones are left alone, a concurrent registration ("already exists")
 * is fine. Returns once the server lists them (a namespace's cache takes a moment).
 */
export async function registerSearchAttributes(
  connection: ConnectionLike,
  namespace: string,
): Promise<RegisterResult> {
  const before = await checkSearchAttributes(connection, namespace);
  if (before.ok === true) return { outcome: 'present' };
  const keys = SEARCH_ATTRIBUTE_KEYS.filter(
    (k) => before.ok === 'unknown' || before.missing.includes(k.name),
  );
  const names = keys.map((k) => k.name);
  if (keys.length > 0) {
    const refusal = await addSearchAttributes(connection, namespace, keys);
    if (refusal !== undefined && before.ok === false)
      return { outcome: 'refused', message: missingSearchAttributesMessage(namespace, before, refusal) };
    if (refusal !== undefined)
      return {
        outcome: 'unknown',
        message: `Temporal would neither list nor register search attributes (${refusal}); make sure namespace "${namespace}" has ${keys.map((k) => `${k.name} (${cliType(k.type)})`).join(', ')}.`,
      };
  }
  if (before.ok === 'unknown') return { outcome: 'registered', names };
  const deadline = Date.now() + REGISTER_WAIT_MS;
  for (;;) {
    const after = await checkSearchAttributes(connection, namespace);
    // All listed now, but some with another type: the operator's to fix.
    if (after.ok === false && after.missing.length === 0)
      return { outcome: 'refused', message: missingSearchAttributesMessage(namespace, after) };
    if (after.ok === true) return { outcome: 'registered', names };
    if (Date.now() > deadline)
      throw new Error(
        `search attributes registered but not listed after ${REGISTER_WAIT_MS} ms: ${names.join(', ')}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Adds the attributes; returns why when the server refused (an existing one is no refusal). */
async function addSearchAttributes(
  connection: ConnectionLike,
  namespace: string,
  keys: readonly (typeof SEARCH_ATTRIBUTE_KEYS)[number][],
): Promise<string | undefined> {
  try {
    await connection.withDeadline(Date.now() + CALL_DEADLINE_MS, () =>
      connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(
          keys.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!]),
        ),
      }),
    );
    return undefined;
  } catch (err) {
    if (!isGrpcServiceError(err)) throw err;
    if (err.code === 6 /* ALREADY_EXISTS */ || /already exists/i.test(err.details)) return undefined;
    if (REFUSED.has(err.code)) return err.details || `gRPC status ${err.code}`;
    throw err;
  }
}
