/**
 * WeCom (企业微信) callback cryptography: the "加解密方案" used on callback URLs.
 *
 * Wire format (all of it fixed by WeCom, not by us):
 *   msg_signature = sha1(sort([token, timestamp, nonce, encrypt]).join('')), lowercase hex
 *   encrypt       = base64(AES-256-CBC(key, iv = key[0..16), pkcs7_32(plain)))
 *   plain         = random(16) | uint32be(len(msg)) | msg | receiveId
 *
 * Everything that takes attacker-controlled input (signature, ciphertext, timestamp)
 * returns a result instead of throwing. Only operator configuration (a malformed
 * EncodingAESKey) throws, because that is a deployment bug, not a request problem.
 *
 * Callers must verify the signature BEFORE decrypting. CBC here has no MAC, and the
 * distinct failure reasons below would otherwise form a padding oracle; the signature
 * (keyed by the token) is what stops an attacker from submitting chosen ciphertexts.
 * Never echo failure reasons back to the HTTP client; log them.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** WeCom pads to 32 bytes (its samples use k = 32), not AES's 16-byte block size. */
const PAD_BLOCK = 32;
const RANDOM_LEN = 16;
const LENGTH_PREFIX_LEN = 4;
const HEADER_LEN = RANDOM_LEN + LENGTH_PREFIX_LEN;

export class WecomKeyError extends Error {
  override readonly name = 'WecomKeyError';
}

/** Closed set of reasons `decrypt` can fail for. */
export type WecomDecryptFailure =
  | 'bad_base64'
  | 'bad_length'
  | 'bad_padding'
  | 'bad_message_length'
  | 'bad_utf8'
  | 'receive_id_mismatch';

export type WecomDecryptResult = { ok: true; message: string } | { ok: false; reason: WecomDecryptFailure };

export type WecomVerifyFailure = 'bad_signature' | WecomDecryptFailure;

export type WecomVerifyResult = { ok: true; message: string } | { ok: false; reason: WecomVerifyFailure };

const ENCODING_AES_KEY_RE = /^[A-Za-z0-9+/]{43}$/;
// Standard alphabet, padded, length multiple of 4. Linear: no nested quantifiers.
const STRICT_BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const DECIMAL_RE = /^[0-9]{1,15}$/;

/**
 * Decodes a 43-char EncodingAESKey into the 32-byte AES key.
 *
 * The last character's low 2 bits are discarded by base64 decoding (43 chars = 258 bits).
 * We deliberately do NOT require those bits to be zero: WeCom's console generates keys
 * as 43 random alphanumerics, and even Tencent's published sample key is non-canonical.
 */
export function parseEncodingAesKey(s: string): Buffer {
  if (typeof s !== 'string' || !ENCODING_AES_KEY_RE.test(s)) {
    throw new WecomKeyError('EncodingAESKey must be exactly 43 base64 characters (A-Z a-z 0-9 + /)');
  }
  const key = Buffer.from(`${s}=`, 'base64');
  if (key.length !== 32) {
    throw new WecomKeyError(`EncodingAESKey must decode to 32 bytes, got ${key.length}`);
  }
  return key;
}

export function computeSignature(token: string, timestamp: string, nonce: string, encrypt: string): string {
  return createHash('sha1').update([token, timestamp, nonce, encrypt].sort().join('')).digest('hex');
}

/** Constant-time equality for strings; a length mismatch is simply `false`. */
function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export function verifySignature(input: {
  token: string;
  timestamp: string;
  nonce: string;
  encrypt: string;
  signature: string;
}): boolean {
  const { token, timestamp, nonce, encrypt, signature } = input;
  if (typeof signature !== 'string') return false;
  const expected = computeSignature(token, timestamp, nonce, encrypt);
  return safeEqual(Buffer.from(expected, 'utf8'), Buffer.from(signature, 'utf8'));
}

/**
 * Node's base64 decoder silently skips invalid characters and tolerates missing
 * padding, so two different strings can decode to the same bytes. The signature is
 * computed over the string, so accept exactly one spelling: the canonical one.
 */
function strictBase64Decode(s: string): Buffer | undefined {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !STRICT_BASE64_RE.test(s)) return undefined;
  const buf = Buffer.from(s, 'base64');
  // Re-encoding catches non-zero trailing bits and '=' in the wrong place.
  return buf.toString('base64') === s ? buf : undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodeUtf8(buf: Buffer): string | undefined {
  try {
    return utf8.decode(buf);
  } catch {
    return undefined;
  }
}

export function decrypt(input: {
  encodingAesKey: string;
  encrypt: string;
  expectedReceiveId: string;
}): WecomDecryptResult {
  const key = parseEncodingAesKey(input.encodingAesKey);
  const fail = (reason: WecomDecryptFailure): WecomDecryptResult => ({ ok: false, reason });

  const cipherText = strictBase64Decode(input.encrypt);
  if (!cipherText) return fail('bad_base64');
  // Padding to 32 means valid ciphertext is a non-empty multiple of 32 (hence also of 16).
  if (cipherText.length === 0 || cipherText.length % PAD_BLOCK !== 0) return fail('bad_length');

  const decipher = createDecipheriv('aes-256-cbc', key, key.subarray(0, 16));
  decipher.setAutoPadding(false); // OpenSSL would enforce 16-byte PKCS#7; we need 32.
  const padded = Buffer.concat([decipher.update(cipherText), decipher.final()]);

  const pad = padded[padded.length - 1]!;
  if (pad < 1 || pad > PAD_BLOCK) return fail('bad_padding');
  for (let i = padded.length - pad; i < padded.length; i++) {
    if (padded[i] !== pad) return fail('bad_padding');
  }
  const plain = padded.subarray(0, padded.length - pad);

  if (plain.length < HEADER_LEN) return fail('bad_message_length');
  const msgLen = plain.readUInt32BE(RANDOM_LEN);
  if (msgLen > plain.length - HEADER_LEN) return fail('bad_message_length');
  const msgBytes = plain.subarray(HEADER_LEN, HEADER_LEN + msgLen);
  const receiveId = plain.subarray(HEADER_LEN + msgLen);

  if (!safeEqual(receiveId, Buffer.from(input.expectedReceiveId, 'utf8'))) return fail('receive_id_mismatch');

  // Buffer#toString would turn corrupt bytes into U+FFFD silently; refuse instead.
  const message = decodeUtf8(msgBytes);
  if (message === undefined) return fail('bad_utf8');
  return { ok: true, message };
}

export function encrypt(input: {
  encodingAesKey: string;
  message: string;
  receiveId: string;
  random?: Buffer;
}): string {
  const key = parseEncodingAesKey(input.encodingAesKey);
  const random = input.random ?? randomBytes(RANDOM_LEN);
  if (random.length !== RANDOM_LEN) throw new RangeError(`random must be ${RANDOM_LEN} bytes`);

  const msg = Buffer.from(input.message, 'utf8');
  const msgLen = Buffer.alloc(LENGTH_PREFIX_LEN);
  msgLen.writeUInt32BE(msg.length);
  const plain = Buffer.concat([random, msgLen, msg, Buffer.from(input.receiveId, 'utf8')]);
  const pad = PAD_BLOCK - (plain.length % PAD_BLOCK); // 1..32: a full block when aligned
  const padded = Buffer.concat([plain, Buffer.alloc(pad, pad)]);

  const cipher = createCipheriv('aes-256-cbc', key, key.subarray(0, 16));
  cipher.setAutoPadding(false);
  return Buffer.concat([cipher.update(padded), cipher.final()]).toString('base64');
}

/**
 * Signature check + decrypt, for both the POST body's <Encrypt> and the GET echostr.
 * Does not check timestamp freshness; use `isTimestampFresh` alongside it.
 */
export function verifyAndDecrypt(input: {
  token: string;
  encodingAesKey: string;
  receiveId: string;
  timestamp: string;
  nonce: string;
  encrypt: string;
  signature: string;
}): WecomVerifyResult {
  const { token, timestamp, nonce, encrypt: ciphertext, signature } = input;
  if (!verifySignature({ token, timestamp, nonce, encrypt: ciphertext, signature })) {
    return { ok: false, reason: 'bad_signature' };
  }
  return decrypt({
    encodingAesKey: input.encodingAesKey,
    encrypt: ciphertext,
    expectedReceiveId: input.receiveId,
  });
}

/**
 * GET callback-URL verification. `echostr` must be the URL-DECODED query value (a '+'
 * in it is a literal '+', i.e. arrived as %2B); WeCom signs the decoded string. The
 * plaintext in `message` is what the handler must return as the response body.
 */
export function verifyUrl(input: {
  token: string;
  encodingAesKey: string;
  receiveId: string;
  timestamp: string;
  nonce: string;
  echostr: string;
  signature: string;
}): WecomVerifyResult {
  const { echostr, ...rest } = input;
  return verifyAndDecrypt({ ...rest, encrypt: echostr });
}

/**
 * Replay window check for the `timestamp` query parameter (seconds since epoch).
 * Only plain decimal digits are accepted: Number() would also take '1e9', ' 12', '0x1f'.
 */
export function isTimestampFresh(timestampSeconds: string, nowMs: number, windowSeconds = 300): boolean {
  if (typeof timestampSeconds !== 'string' || !DECIMAL_RE.test(timestampSeconds)) return false;
  if (!Number.isFinite(nowMs) || !Number.isFinite(windowSeconds) || windowSeconds < 0) return false;
  const skewSeconds = Math.abs(nowMs / 1000 - Number(timestampSeconds));
  return skewSeconds <= windowSeconds;
}
