import type { Client } from '@temporalio/client';
import { Hono } from 'hono';
import type { bareWorkflow } from './bare-workflow';

/**
 * The ingress of bench/e2e.ts's baseline: the same Telegram update, posted the same way as ours
 * (app.request on a webhook route), with nothing of ours around it — no route or secret check, no
 * validation, no database — only JSON.parse and the start of the bare workflow, which then makes
 * the same Bot API calls as ours. `plan` gives that workflow's input for a chat and text: the
 * bench's memoized reply segments and the pacing of the side (the route's `:pacing`), so neither
 * side is charged for the bench's own bookkeeping.
 */
export function createBareWebhookApp(opts: {
  temporal: Client;
  taskQueue: string;
  plan: (text: string, paced: boolean) => { segments: string[]; intervalMs: number };
}): Hono {
  const app = new Hono();
  app.post('/webhook/:pacing', async (c) => {
    const update = JSON.parse(await c.req.text()) as { message?: { chat: { id: number }; text?: string } };
    const m = update.message;
    if (!m) return c.json({});
    const chatId = String(m.chat.id);
    await opts.temporal.workflow.start<typeof bareWorkflow>('bareWorkflow', {
      taskQueue: opts.taskQueue,
      workflowId: `bare-${chatId}`,
      args: [{ chatId, ...opts.plan(m.text ?? '', c.req.param('pacing') === 'paced') }],
    });
    return c.json({});
  });
  return app;
}
