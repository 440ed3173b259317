/**
 * Parsing for WeCom callback XML: the outer envelope (<Encrypt> etc.) and the
 * decrypted inner message.
 *
 * The envelope arrives from the internet before any authentication, so the parser is
 * locked down: a size cap, no DTDs at all (billion laughs / XXE), no entity expansion,
 * and no number coercion (MsgId exceeds 2^53 and must stay an exact string).
 * Attacker input never throws; callers get `{ ok: false, reason }`.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { z } from 'zod';

/** Real callbacks are a few KiB; anything near this is abuse. Measured in UTF-8 bytes. */
export const MAX_XML_BYTES = 64 * 1024;

/** `forbidden_markup`: DOCTYPE, ENTITY or any other `<!…` besides CDATA (comments included). */
export type WecomXmlFailure = 'too_large' | 'forbidden_markup' | 'malformed' | 'invalid_shape';

export type WecomXmlResult<T> = { ok: true; value: T } | { ok: false; reason: WecomXmlFailure };

const parser = new XMLParser({
  processEntities: false, // '&foo;' stays literal; WeCom wraps free text in CDATA anyway
  htmlEntities: false,
  parseTagValue: false, // every value stays a string
  parseAttributeValue: false,
  ignoreAttributes: true,
  trimValues: false, // CDATA is never trimmed; this keeps plain-text values exact too
  ignoreDeclaration: true,
  ignorePiTags: true,
});

/** Index of the '>' closing the tag that starts at `i`, skipping quoted attribute values. */
function endOfTag(xml: string, i: number): number {
  for (let j = i + 1; j < xml.length; j++) {
    const c = xml[j];
    if (c === '>') return j;
    if (c === '"' || c === "'") {
      j = xml.indexOf(c, j + 1);
      if (j === -1) return -1;
    }
  }
  return -1;
}

/**
 * Looks for any `<!…` construct other than CDATA: <!DOCTYPE, <!ENTITY, <!ELEMENT, and
 * comments too. WeCom sends none of these, so we refuse them outright rather than rely
 * on the parser's DTD handling. A naive `includes('<!DOCTYPE')` would also reject chat
 * text that merely mentions it inside <Content><![CDATA[…]]>, so this walks the markup
 * the way fast-xml-parser does (CDATA and quoted attribute values are skipped; where the
 * two could differ this one sees more markup, never less). Linear time.
 */
function scanMarkup(xml: string): 'clean' | 'forbidden' | 'unterminated' {
  let i = xml.indexOf('<');
  while (i !== -1) {
    let end: number;
    if (xml.startsWith('<![CDATA[', i)) {
      const close = xml.indexOf(']]>', i + 9);
      end = close === -1 ? -1 : close + 2;
    } else if (xml.startsWith('<!', i)) {
      return 'forbidden';
    } else if (xml.startsWith('</', i)) {
      end = xml.indexOf('>', i); // as fast-xml-parser does: end tags have no quoted parts
    } else {
      end = endOfTag(xml, i); // start tags and <?…?>
    }
    if (end === -1) return 'unterminated';
    i = xml.indexOf('<', end + 1);
  }
  return 'clean';
}

function parseRoot(xml: string): WecomXmlResult<Record<string, unknown>> {
  if (typeof xml !== 'string') return { ok: false, reason: 'malformed' };
  // UTF-8 length >= UTF-16 length, so the cheap check first avoids scanning huge strings.
  if (xml.length > MAX_XML_BYTES || Buffer.byteLength(xml, 'utf8') > MAX_XML_BYTES) {
    return { ok: false, reason: 'too_large' };
  }
  const markup = scanMarkup(xml);
  if (markup === 'forbidden') return { ok: false, reason: 'forbidden_markup' };
  if (markup === 'unterminated') return { ok: false, reason: 'malformed' };
  let doc: unknown;
  try {
    // The parser itself is lenient (it accepts unclosed tags), so validate first.
    if (XMLValidator.validate(xml) !== true) return { ok: false, reason: 'malformed' };
    doc = parser.parse(xml);
  } catch {
    return { ok: false, reason: 'malformed' }; // e.g. a <__proto__> element
  }
  // Exactly one root, named <xml>; the validator tolerates several top-level elements.
  if (typeof doc !== 'object' || doc === null) return { ok: false, reason: 'malformed' };
  const keys = Object.keys(doc);
  const root = (doc as Record<string, unknown>).xml;
  if (keys.length !== 1 || keys[0] !== 'xml' || typeof root !== 'object' || root === null) {
    return { ok: false, reason: 'invalid_shape' };
  }
  return { ok: true, value: root as Record<string, unknown> };
}

// A repeated element parses to an array and a nested one to an object; both fail
// z.string(), so ambiguous documents are rejected rather than guessed at.
const text = z.string();
const nonEmpty = z.string().min(1);
/** Optional field where WeCom sometimes sends an empty element instead of omitting it. */
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));
const decimal = z.string().regex(/^[0-9]{1,20}$/);

const envelopeSchema = z.object({
  // The authoritative binding to our corp is the receiveId inside the ciphertext,
  // so ToUserName is informational and tolerated when absent.
  ToUserName: optionalText,
  Encrypt: nonEmpty,
  AgentID: optionalText,
});

export type WecomEnvelope = {
  toUser?: string;
  encrypt: string;
  agentId?: string;
};

export function parseEnvelope(xml: string): WecomXmlResult<WecomEnvelope> {
  const root = parseRoot(xml);
  if (!root.ok) return root;
  const r = envelopeSchema.safeParse(root.value);
  if (!r.success) return { ok: false, reason: 'invalid_shape' };
  const { ToUserName, Encrypt, AgentID } = r.data;
  const value: WecomEnvelope = { encrypt: Encrypt };
  if (ToUserName !== undefined) value.toUser = ToUserName;
  if (AgentID !== undefined) value.agentId = AgentID;
  return { ok: true, value };
}

const innerSchema = z.object({
  ToUserName: nonEmpty,
  FromUserName: nonEmpty,
  CreateTime: decimal,
  MsgType: nonEmpty,
  Content: text.optional(), // '' is a legitimate (if odd) text message: keep it
  MsgId: optionalText,
  AgentID: optionalText,
  Event: optionalText,
  ChatId: optionalText,
  MediaId: optionalText,
  PicUrl: optionalText,
});

export type WecomInnerMessage = {
  msgType: string;
  fromUser: string;
  toUser: string;
  /** Seconds since epoch, as sent (decimal string). */
  createTime: string;
  content?: string;
  /** Exact decimal string; exceeds Number.MAX_SAFE_INTEGER in practice. */
  msgId?: string;
  agentId?: string;
  event?: string;
  chatId?: string;
  mediaId?: string;
  picUrl?: string;
};

export function parseInnerMessage(xml: string): WecomXmlResult<WecomInnerMessage> {
  const root = parseRoot(xml);
  if (!root.ok) return root;
  const r = innerSchema.safeParse(root.value);
  if (!r.success) return { ok: false, reason: 'invalid_shape' };
  const d = r.data;
  const value: WecomInnerMessage = {
    msgType: d.MsgType,
    fromUser: d.FromUserName,
    toUser: d.ToUserName,
    createTime: d.CreateTime,
  };
  // Only set keys that are present, so results compare cleanly with toEqual/structuredClone.
  if (d.Content !== undefined) value.content = d.Content;
  if (d.MsgId !== undefined) value.msgId = d.MsgId;
  if (d.AgentID !== undefined) value.agentId = d.AgentID;
  if (d.Event !== undefined) value.event = d.Event;
  if (d.ChatId !== undefined) value.chatId = d.ChatId;
  if (d.MediaId !== undefined) value.mediaId = d.MediaId;
  if (d.PicUrl !== undefined) value.picUrl = d.PicUrl;
  return { ok: true, value };
}
