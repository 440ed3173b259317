import type { Channel } from '../workflows/shared';
import { CHANNEL_LIMITS } from './segment';

/**
 * What each channel's protocol supports, as recorded on a binding (`capabilities`, with
 * `capability_version`) and shown by the admin API. Bump CAPABILITY_VERSION whenever an entry
 * changes meaning, and backfill (migration 0035 wrote version 1 into the bindings before it).
 *   typing     the provider shows "typing…" (Telegram sendChatAction)
 *   drafts     a reply can be shown while it is written (Telegram: one message edited in place,
 *              editMessageText; binding config.live_drafts, activities/live-drafts.ts)
 *   media_in   attachment kinds a user's message may carry that are downloaded and given to the agent
 *   media_out  attachment kinds a reply may carry
 *   text_limit one text segment's limit (what channels/segment.ts cuts at)
 */
/** 2: console bindings take attachments (media_in), migration 0041. */
export const CAPABILITY_VERSION = 2;

export type MediaKind = 'image' | 'audio' | 'video' | 'file';

export interface ChannelCapabilities {
  typing: boolean;
  drafts: boolean;
  media_in: MediaKind[];
  media_out: ('image' | 'file')[];
  text_limit: { unit: 'utf16' | 'utf8_bytes'; max: number };
}

export const CHANNEL_CAPABILITIES: Readonly<Record<Channel, ChannelCapabilities>> = {
  telegram: {
    typing: true,
    drafts: true,
    media_in: ['image', 'audio', 'video', 'file'],
    media_out: ['image', 'file'],
    text_limit: { ...CHANNEL_LIMITS.telegram },
  },
  wecom: {
    typing: false,
    drafts: false,
    media_in: ['image', 'audio', 'video', 'file'],
    media_out: ['image', 'file'],
    text_limit: { ...CHANNEL_LIMITS.wecom },
  },
  console: {
    typing: false,
    drafts: false,
    // Uploaded through the admin API with the message, stored before it is recorded.
    media_in: ['image', 'audio', 'video', 'file'],
    media_out: [],
    text_limit: { ...CHANNEL_LIMITS.console },
  },
};

export function capabilitiesOf(channel: Channel): { version: number; capabilities: ChannelCapabilities } {
  return { version: CAPABILITY_VERSION, capabilities: CHANNEL_CAPABILITIES[channel] };
}
