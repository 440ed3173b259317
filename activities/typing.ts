import { TELEGRAM_API_BASE, telegramSendChatAction } from '../channels/telegram/client';
import type { BindingSecret } from '../db/queries/conversation';
import { secretAad } from '../lib/secret-box';
import type { ActivityDeps } from './deps';

// The typing indicator while a remote model turn runs (issue #15): Telegram shows "typing…" for
// about 5 s after sendChatAction, or until the bot's next message, so it is renewed every 4.5 s
// and never sent more often than that to one chat (by this process: consecutive model turns of one
// execution, retries), and stopped when the model call ends — before the reply's first segment.
// Best effort: a failed or refused call changes nothing, and only the egress rules and the
// binding's api_base_url apply (the same as for its sends).

export const TYPING_RENEW_MS = 4500;
const CALL_TIMEOUT_MS = 2000;
/** When a chat was last sent a typing action by this process (bounded: old entries are dropped). */
const lastSent = new Map<string, number>();
const MAX_REMEMBERED = 10_000;

export interface Typing {
  /** Stops renewing; waits (briefly) for a call in flight, so none lands after the reply. */
  stop(): Promise<void>;
}

const NOOP: Typing = { stop: async () => undefined };

export function startTyping(
  deps: Pick<ActivityDeps, 'secrets' | 'log'>,
  p: {
    tenantId: string;
    bindingId: string;
    binding: BindingSecret | null;
    target: { chatId: string; threadId: string | null };
    renewMs?: number;
  },
): Typing {
  const { binding } = p;
  if (binding?.channel !== 'telegram' || binding.penalized) return NOOP;
  const botToken = botTokenOf(deps, p.tenantId, binding);
  if (!botToken) return NOOP;
  const apiBaseUrl = apiBaseOf(binding.config);
  const renewMs = p.renewMs ?? TYPING_RENEW_MS;
  const key = `${p.tenantId}/${p.bindingId}/${p.target.chatId}/${p.target.threadId ?? ''}`;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();

  const send = () => {
    if (stopped) return;
    lastSent.set(key, Date.now());
    if (lastSent.size > MAX_REMEMBERED) {
      const cutoff = Date.now() - renewMs;
      for (const [k, at] of lastSent) if (at < cutoff) lastSent.delete(k);
    }
    inFlight = telegramSendChatAction({
      apiBaseUrl,
      botToken,
      chatId: p.target.chatId,
      threadId: p.target.threadId,
      action: 'typing',
      timeoutMs: CALL_TIMEOUT_MS,
    }).then((accepted) => {
      if (!accepted) deps.log.debug({ tenantId: p.tenantId }, 'typing indicator not accepted');
    });
    timer = setTimeout(send, renewMs);
  };
  const previous = lastSent.get(key);
  timer = setTimeout(send, previous === undefined ? 0 : Math.max(0, previous + renewMs - Date.now()));
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await Promise.race([inFlight, new Promise((r) => setTimeout(r, CALL_TIMEOUT_MS))]);
    },
  };
}

/** The bot token in a Telegram binding's sealed secret; null when it does not open or has none. */
export function botTokenOf(deps: Pick<ActivityDeps, 'secrets'>, tenantId: string, binding: BindingSecret) {
  try {
    const secret = JSON.parse(
      deps.secrets.open(binding.ciphertext, secretAad(tenantId, binding.secretRef), binding.keyId),
    ) as { bot_token?: unknown };
    return typeof secret.bot_token === 'string' && secret.bot_token !== '' ? secret.bot_token : null;
  } catch {
    return null;
  }
}

/** A Telegram binding's Bot API base (config.api_base_url, else Telegram's). */
export const apiBaseOf = (config: Record<string, unknown>) =>
  typeof config.api_base_url === 'string' ? config.api_base_url : TELEGRAM_API_BASE;
