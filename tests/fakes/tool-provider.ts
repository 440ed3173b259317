// Fake idempotent tool provider: POST /tools/<name> with Idempotency-Key, GET /receipts/<key>.
// Test fixture only.
import { isDeepStrictEqual } from 'node:util';
import {
  answer,
  type Fault,
  FaultInjector,
  type FaultKind,
  type FaultPlan,
  parseBody,
  type RandomFaultOptions,
  type RecordedRequest,
  type Reply,
  readBody,
  sendJson,
  startServer,
  waitForCount,
} from './http';

export interface ToolReceipt {
  receipt_id: string;
  key: string;
  tool: string;
  /** echo of the JSON args */
  result: Record<string, unknown>;
  applied_at: string;
}

export interface ToolEffect {
  key: string;
  tool: string;
  args: Record<string, unknown>;
  receiptId: string;
  at: number;
}

export interface ToolRequest extends RecordedRequest {
  tool?: string;
  key?: string;
  /** true when an existing receipt was returned instead of applying again */
  replayed?: boolean;
}

export interface ToolRejection {
  /** 4xx status to answer (default 422) */
  status?: number;
  error?: string;
}

export interface FakeToolProvider {
  readonly url: string;
  /** applied effects, at most one per idempotency key */
  readonly effects: ToolEffect[];
  readonly requests: ToolRequest[];
  /** FIFO of faults applied to the next POST /tools/* requests */
  readonly faults: Fault[];
  readonly faultsInjected: number;
  readonly faultsByKind: Readonly<Record<FaultKind, number>>;
  effectCount(key: string): number;
  receipt(key: string): ToolReceipt | undefined;
  /** make a tool answer 4xx `{ error }` (default 422 'rejected') without applying */
  rejectTool(name: string, rejection?: ToolRejection): void;
  /** undo rejectTool */
  acceptTool(name: string): void;
  setFaultPlan(plan: FaultPlan<ToolRequest> | undefined): void;
  failRandomly(opts: RandomFaultOptions | undefined): void;
  clearFaults(): void;
  waitForEffects(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFakeToolProvider(): Promise<FakeToolProvider> {
  const effects: ToolEffect[] = [];
  const requests: ToolRequest[] = [];
  const receipts = new Map<string, ToolReceipt>();
  const rejections = new Map<string, ToolRejection>();
  const injector = new FaultInjector<ToolRequest>();
  let seq = 0;

  const invoke = (tool: string, key: string | undefined, args: unknown, rec: ToolRequest): Reply => {
    if (!key) return { status: 400, body: { error: 'missing Idempotency-Key header' } };
    if (!args || typeof args !== 'object')
      return { status: 400, body: { error: 'body must be a JSON object' } };
    const existing = receipts.get(key);
    if (existing) {
      if (existing.tool !== tool || !isDeepStrictEqual(existing.result, args)) {
        return { status: 422, body: { error: 'Idempotency-Key reused with different parameters' } };
      }
      rec.replayed = true;
      return { status: 200, body: existing };
    }
    const rejection = rejections.get(tool);
    if (rejection) return { status: rejection.status ?? 422, body: { error: rejection.error ?? 'rejected' } };
    const at = Date.now();
    const receipt: ToolReceipt = {
      receipt_id: `rcpt_${++seq}`,
      key,
      tool,
      result: { ...(args as Record<string, unknown>) },
      applied_at: new Date(at).toISOString(),
    };
    receipts.set(key, receipt);
    effects.push({ key, tool, args: receipt.result, receiptId: receipt.receipt_id, at });
    return { status: 200, body: receipt };
  };

  const srv = await startServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const body = parseBody(req, raw);
    const toolMatch = /^\/tools\/([^/]+)$/.exec(url.pathname);
    const receiptMatch = /^\/receipts\/([^/]+)$/.exec(url.pathname);
    const header = req.headers['idempotency-key'];
    const key = (Array.isArray(header) ? header[0] : header) || undefined;
    const isTool = req.method === 'POST' && toolMatch !== null;
    const rec: ToolRequest = {
      at: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      endpoint: isTool ? 'tool' : receiptMatch ? 'receipt' : url.pathname,
      body,
      headers: req.headers,
      ...(toolMatch?.[1] ? { tool: decodeURIComponent(toolMatch[1]) } : {}),
      ...(key ? { key } : {}),
    };
    if (receiptMatch?.[1]) rec.key = decodeURIComponent(receiptMatch[1]);
    requests.push(rec);
    if (!isTool && !(req.method === 'GET' && receiptMatch)) {
      rec.status = 404;
      return sendJson(res, 404, { error: 'not found' });
    }
    const fault = injector.next(rec, isTool);
    await answer(
      srv,
      res,
      rec,
      fault,
      (f) =>
        f.kind === 'status'
          ? { status: f.status, body: { error: 'internal error (injected)' } }
          : {
              status: 429,
              body: { error: 'rate limited' },
              headers: { 'retry-after': String(f.retryAfterSeconds) },
            },
      () => {
        if (!isTool) {
          const r = receipts.get(rec.key ?? '');
          return r ? { status: 200, body: r } : { status: 404, body: { error: 'receipt not found' } };
        }
        return invoke(rec.tool ?? '', key, body, rec);
      },
    );
  });

  return {
    url: srv.url,
    effects,
    requests,
    faults: injector.queue,
    get faultsInjected() {
      return injector.injected;
    },
    faultsByKind: injector.injectedByKind,
    effectCount: (key) => effects.filter((e) => e.key === key).length,
    receipt: (key) => receipts.get(key),
    rejectTool: (name, rejection = {}) => void rejections.set(name, rejection),
    acceptTool: (name) => void rejections.delete(name),
    setFaultPlan: (plan) => injector.setPlan(plan),
    failRandomly: (o) => injector.failRandomly(o),
    clearFaults: () => injector.clear(),
    waitForEffects: (n, timeoutMs = 5000) =>
      waitForCount(() => effects.length, n, timeoutMs, 'applied tool effects'),
    close: () => srv.close(),
  };
}
