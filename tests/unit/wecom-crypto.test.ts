import { createCipheriv } from 'node:crypto';
import * as oracle from '@wecom/crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  computeSignature,
  decrypt,
  encrypt,
  isTimestampFresh,
  parseEncodingAesKey,
  verifyAndDecrypt,
  verifySignature,
  verifyUrl,
  WecomKeyError,
} from '../../channels/wecom/crypto';
import vectors from '../fixtures/wecom/vectors.json';

const { official, generated } = vectors;
const KEY = official.encodingAesKey;
const TOKEN = official.token;
const RID = official.receiveId;
const FIXED_RANDOM = Buffer.alloc(16, 7);

/** Encrypts arbitrary plaintext bytes with no padding of its own, to craft malformed payloads. */
function rawEncrypt(plain: Buffer, key = KEY): string {
  const k = parseEncodingAesKey(key);
  const c = createCipheriv('aes-256-cbc', k, k.subarray(0, 16));
  c.setAutoPadding(false);
  return Buffer.concat([c.update(plain), c.final()]).toString('base64');
}

/** random | len | msg | id, without padding. */
function layout(msg: Buffer, id: string, declaredLen = msg.length): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(declaredLen);
  return Buffer.concat([FIXED_RANDOM, len, msg, Buffer.from(id)]);
}

function pkcs7(plain: Buffer, block = 32): Buffer {
  const pad = block - (plain.length % block);
  return Buffer.concat([plain, Buffer.alloc(pad, pad)]);
}

const dec = (enc: string, expectedReceiveId = RID) =>
  decrypt({ encodingAesKey: KEY, encrypt: enc, expectedReceiveId });

describe('parseEncodingAesKey', () => {
  it('decodes the 43-char key to 32 bytes, accepting non-canonical trailing bits', () => {
    // The official key ends in 'C', whose low 2 bits are non-zero: must still be accepted.
    const key = parseEncodingAesKey(KEY);
    expect(key).toHaveLength(32);
    expect(key.equals(Buffer.from(`${KEY}=`, 'base64'))).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['42 chars', KEY.slice(0, 42)],
    ['44 chars', `${KEY}A`],
    ['with padding', `${KEY.slice(0, 42)}=`],
    ['url-safe alphabet', `${KEY.slice(0, 42)}-`],
    ['whitespace', ` ${KEY.slice(1)}`],
    ['non-ascii', `${KEY.slice(0, 42)}é`],
  ])('rejects %s with WecomKeyError', (_name, key) => {
    expect(() => parseEncodingAesKey(key)).toThrow(WecomKeyError);
  });

  it('decrypt/encrypt surface a bad key as a config error (throw), not a request failure', () => {
    expect(() => decrypt({ encodingAesKey: 'short', encrypt: 'AAAA', expectedReceiveId: RID })).toThrow(
      WecomKeyError,
    );
    expect(() => encrypt({ encodingAesKey: 'short', message: 'x', receiveId: RID })).toThrow(WecomKeyError);
  });
});

describe('official vectors (Tencent sample)', () => {
  const v = official.verifyUrl;
  const m = official.message;
  const encryptOfBody = /<Encrypt><!\[CDATA\[(.*?)\]\]><\/Encrypt>/.exec(m.body)![1]!;

  it('reproduces the published GET msg_signature', () => {
    expect(computeSignature(TOKEN, v.timestamp, v.nonce, v.echostr)).toBe(v.msgSignature);
  });

  it('verifyUrl returns the published echo plaintext', () => {
    const r = verifyUrl({
      token: TOKEN,
      encodingAesKey: KEY,
      receiveId: RID,
      timestamp: v.timestamp,
      nonce: v.nonce,
      echostr: v.echostr,
      signature: v.msgSignature,
    });
    expect(r).toEqual({ ok: true, message: v.plaintext });
  });

  it('reproduces the published POST msg_signature and decrypts the message', () => {
    expect(computeSignature(TOKEN, m.timestamp, m.nonce, encryptOfBody)).toBe(m.msgSignature);
    const r = verifyAndDecrypt({
      token: TOKEN,
      encodingAesKey: KEY,
      receiveId: RID,
      timestamp: m.timestamp,
      nonce: m.nonce,
      encrypt: encryptOfBody,
      signature: m.msgSignature,
    });
    expect(r).toEqual({ ok: true, message: m.plaintext });
  });

  it('the echostr is signed in URL-decoded form: "+" must arrive as %2B and be decoded to "+"', () => {
    expect(v.echostr).toContain('+');
    const decoded = new URLSearchParams(`echostr=${v.echostrUrlEncoded}`).get('echostr')!;
    expect(decoded).toBe(v.echostr);
    const base = {
      token: TOKEN,
      encodingAesKey: KEY,
      receiveId: RID,
      timestamp: v.timestamp,
      nonce: v.nonce,
    };
    expect(verifyUrl({ ...base, echostr: decoded, signature: v.msgSignature }).ok).toBe(true);
    // Passing the still-encoded value fails the signature.
    expect(verifyUrl({ ...base, echostr: v.echostrUrlEncoded, signature: v.msgSignature })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    // A raw (unencoded) '+' in a query string decodes to ' ': that too must fail, not half-work.
    const spaced = new URLSearchParams(`echostr=${v.echostr}`).get('echostr')!;
    expect(spaced).toContain(' ');
    expect(verifyUrl({ ...base, echostr: spaced, signature: v.msgSignature })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
  });
});

describe('pinned generated vector (from @wecom/crypto, not official)', () => {
  it('our encrypt with the same random reproduces it byte for byte', () => {
    const g = generated;
    const enc = encrypt({
      encodingAesKey: g.encodingAesKey,
      message: g.plaintext,
      receiveId: g.receiveId,
      random: Buffer.from(g.randomHex, 'hex'),
    });
    expect(enc).toBe(g.encrypt);
    expect(computeSignature(g.token, g.timestamp, g.nonce, enc)).toBe(g.msgSignature);
    expect(dec(g.encrypt)).toEqual({ ok: true, message: g.plaintext });
  });
});

describe('oracle: @wecom/crypto', () => {
  const unicode = fc.string({ unit: 'binary', maxLength: 300 });
  const ids = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 });

  it('our encrypt -> oracle decrypt', () => {
    fc.assert(
      fc.property(unicode, ids, (message, receiveId) => {
        const out = oracle.decrypt(KEY, encrypt({ encodingAesKey: KEY, message, receiveId }));
        expect(out.message).toBe(message);
        expect(out.id).toBe(receiveId);
      }),
    );
  });

  it('oracle encrypt -> our decrypt', () => {
    fc.assert(
      fc.property(unicode, ids, (message, receiveId) => {
        const r = dec(oracle.encrypt(KEY, message, receiveId), receiveId);
        expect(r).toEqual({ ok: true, message });
      }),
    );
  });

  it('identical ciphertext for identical random', () => {
    fc.assert(
      fc.property(unicode, fc.uint8Array({ minLength: 16, maxLength: 16 }), (message, rnd) => {
        const random = Buffer.from(rnd);
        expect(encrypt({ encodingAesKey: KEY, message, receiveId: RID, random })).toBe(
          oracle.encrypt(KEY, message, RID, random),
        );
      }),
    );
  });

  it('computeSignature equals getSignature', () => {
    const s = fc.string({ unit: 'binary-ascii', maxLength: 64 });
    fc.assert(
      fc.property(s, s, s, s, (token, ts, nonce, enc) => {
        expect(computeSignature(token, ts, nonce, enc)).toBe(oracle.getSignature(token, ts, nonce, enc));
      }),
    );
  });
});

describe('encrypt', () => {
  it('pads with a full 32-byte block when the plaintext is already aligned', () => {
    // 16 + 4 + 0 + 12 = 32 bytes of plaintext -> 64 bytes of ciphertext.
    const enc = encrypt({
      encodingAesKey: KEY,
      message: '',
      receiveId: 'x'.repeat(12),
      random: FIXED_RANDOM,
    });
    expect(Buffer.from(enc, 'base64')).toHaveLength(64);
    expect(dec(enc, 'x'.repeat(12))).toEqual({ ok: true, message: '' });
  });

  it('rejects a random prefix that is not 16 bytes', () => {
    expect(() =>
      encrypt({ encodingAesKey: KEY, message: 'x', receiveId: RID, random: Buffer.alloc(15) }),
    ).toThrow(RangeError);
  });

  it('uses fresh randomness by default', () => {
    const a = encrypt({ encodingAesKey: KEY, message: 'same', receiveId: RID });
    const b = encrypt({ encodingAesKey: KEY, message: 'same', receiveId: RID });
    expect(a).not.toBe(b);
  });
});

describe('decrypt: negative matrix', () => {
  const good = encrypt({ encodingAesKey: KEY, message: 'hello world', receiveId: RID, random: FIXED_RANDOM });
  const goodBytes = Buffer.from(good, 'base64');
  const b64 = (b: Buffer) => b.toString('base64');

  it('sanity: the baseline decrypts', () => {
    expect(dec(good)).toEqual({ ok: true, message: 'hello world' });
  });

  it('empty input is bad_length (valid base64 of zero bytes)', () => {
    expect(dec('')).toEqual({ ok: false, reason: 'bad_length' });
  });

  it.each([
    ['non-base64 characters', `${good.slice(0, -4)}!!!!`],
    ['embedded newline', `${good.slice(0, 8)}\n${good.slice(8)}`],
    ['embedded space', `${good.slice(0, 8)} ${good.slice(8)}`],
    ['url-safe alphabet', good.replaceAll('+', '-').replaceAll('/', '_')],
    ['missing padding', 'QQ'],
    ['padding in the middle', `QQ==${good}`],
    ['non-canonical trailing bits', 'QR=='],
    ['one char dropped', good.slice(1)],
  ])('bad_base64: %s', (_name, input) => {
    expect(dec(input)).toEqual({ ok: false, reason: 'bad_base64' });
  });

  it.each([
    ['truncated by one AES block', b64(goodBytes.subarray(0, goodBytes.length - 16))],
    ['16 bytes only', b64(goodBytes.subarray(0, 16))],
    ['a stray byte appended', b64(Buffer.concat([goodBytes, Buffer.from([1])]))],
    ['an extra AES block appended', b64(Buffer.concat([goodBytes, Buffer.alloc(16)]))],
  ])('bad_length: %s', (_name, input) => {
    expect(dec(input)).toEqual({ ok: false, reason: 'bad_length' });
  });

  it('truncated by a whole 32-byte block: fails (garbage padding or length), never ok', () => {
    const r = dec(b64(goodBytes.subarray(0, goodBytes.length - 32)));
    expect(r.ok).toBe(false);
  });

  it('an extra 32-byte block appended fails', () => {
    const r = dec(b64(Buffer.concat([goodBytes, Buffer.alloc(32, 0xab)])));
    expect(r.ok).toBe(false);
  });

  it('a 16-byte-PKCS#7 payload (wrong block size) is rejected', () => {
    const plain = layout(Buffer.from('hi'), RID); // 38 bytes -> pad to 48
    expect(dec(rawEncrypt(pkcs7(plain, 16)))).toEqual({ ok: false, reason: 'bad_length' });
  });

  describe('bad_padding', () => {
    const body = layout(Buffer.from('hello'), RID); // 16 + 4 + 5 + 18 = 43 bytes
    const padTo64 = (fill: (i: number) => number) =>
      Buffer.concat([body, Buffer.from(Array.from({ length: 64 - body.length }, (_, i) => fill(i)))]);

    it('pad byte 0', () => {
      expect(dec(rawEncrypt(padTo64(() => 0)))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('pad byte 33', () => {
      expect(dec(rawEncrypt(padTo64(() => 33)))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('pad byte 33 over 33 consistent bytes (valid PKCS#7 for a bigger block, not for 32)', () => {
      const msg = Buffer.alloc(63 - 20 - RID.length, 0x61); // plaintext of exactly 63 bytes
      const tampered = Buffer.concat([layout(msg, RID), Buffer.alloc(33, 33)]);
      expect(tampered).toHaveLength(96);
      expect(dec(rawEncrypt(tampered))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('pad byte 255', () => {
      expect(dec(rawEncrypt(padTo64(() => 255)))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('inconsistent pad bytes', () => {
      const n = 64 - body.length; // 21
      const tampered = padTo64((i) => (i === 3 ? 20 : n));
      expect(dec(rawEncrypt(tampered))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('last pad byte claims a longer run than the padding has', () => {
      const n = 64 - body.length; // 21 bytes of padding, but the final one says 32
      const tampered = padTo64((i) => (i === n - 1 ? 32 : n));
      expect(dec(rawEncrypt(tampered))).toEqual({ ok: false, reason: 'bad_padding' });
    });

    it('a well-formed 32-byte pad block is accepted', () => {
      const aligned = layout(Buffer.alloc(0), 'x'.repeat(12)); // exactly 32 bytes
      expect(dec(rawEncrypt(pkcs7(aligned)), 'x'.repeat(12))).toEqual({ ok: true, message: '' });
    });
  });

  describe('bad_message_length', () => {
    it('declared length beyond the plaintext', () => {
      const plain = layout(Buffer.from('hello'), RID, 5 + RID.length + 1);
      expect(dec(rawEncrypt(pkcs7(plain)))).toEqual({ ok: false, reason: 'bad_message_length' });
    });

    it('declared length 0xFFFFFFFF', () => {
      const plain = layout(Buffer.from('hello'), RID, 0xffffffff);
      expect(dec(rawEncrypt(pkcs7(plain)))).toEqual({ ok: false, reason: 'bad_message_length' });
    });

    it('plaintext shorter than the 20-byte header', () => {
      const plain = Buffer.concat([Buffer.alloc(10), Buffer.alloc(22, 22)]); // 10 bytes + full pad
      expect(dec(rawEncrypt(plain))).toEqual({ ok: false, reason: 'bad_message_length' });
    });
  });

  describe('receive_id_mismatch', () => {
    const enc = encrypt({ encodingAesKey: KEY, message: 'hi', receiveId: RID });

    it.each([
      ['different id', 'wwOTHERCORP00000000'],
      ['prefix of the real id', RID.slice(0, -1)],
      ['real id plus suffix', `${RID}x`],
      ['empty expected id', ''],
      ['different case', RID.toUpperCase()],
    ])('%s', (_name, expected) => {
      expect(dec(enc, expected)).toEqual({ ok: false, reason: 'receive_id_mismatch' });
    });

    it('a declared length that shifts bytes between msg and id is caught', () => {
      // msg "hi" + id, but declared 3: id becomes RID minus its first char.
      const plain = layout(Buffer.from('hi'), RID, 3);
      expect(dec(rawEncrypt(pkcs7(plain)))).toEqual({ ok: false, reason: 'receive_id_mismatch' });
    });

    it('empty receive id round-trips when expected empty', () => {
      const e = encrypt({ encodingAesKey: KEY, message: 'hi', receiveId: '' });
      expect(dec(e, '')).toEqual({ ok: true, message: 'hi' });
    });
  });

  it('bad_utf8: invalid UTF-8 in the message is refused, not replaced with U+FFFD', () => {
    const plain = layout(Buffer.from([0x68, 0xff, 0xfe]), RID);
    expect(dec(rawEncrypt(pkcs7(plain)))).toEqual({ ok: false, reason: 'bad_utf8' });
  });

  it('a different key fails', () => {
    const otherKey = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG';
    const enc = encrypt({ encodingAesKey: otherKey, message: 'hello', receiveId: RID, random: FIXED_RANDOM });
    expect(dec(enc).ok).toBe(false);
  });
});

describe('verifySignature', () => {
  const args = { token: TOKEN, timestamp: '1409659589', nonce: '263014780', encrypt: 'abc' };
  const sig = computeSignature(args.token, args.timestamp, args.nonce, args.encrypt);

  it('accepts the correct signature', () => {
    expect(sig).toMatch(/^[0-9a-f]{40}$/);
    expect(verifySignature({ ...args, signature: sig })).toBe(true);
  });

  it.each([
    ['wrong signature', `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`],
    ['uppercase hex', sig.toUpperCase()],
    ['shorter', sig.slice(0, 39)],
    ['longer', `${sig}0`],
    ['empty', ''],
    ['same char length, different byte length', `${sig.slice(0, 39)}é`],
  ])('rejects %s without throwing', (_name, signature) => {
    expect(verifySignature({ ...args, signature })).toBe(false);
  });

  it.each([
    ['token', { token: 'other' }],
    ['timestamp', { timestamp: '1409659590' }],
    ['nonce', { nonce: '263014781' }],
    ['encrypt', { encrypt: 'abd' }],
  ])('binds the %s', (_name, change) => {
    expect(verifySignature({ ...args, ...change, signature: sig })).toBe(false);
  });

  it('sorts the four parts (order of arguments does not matter to the hash input)', () => {
    expect(computeSignature('b', 'a', 'd', 'c')).toBe(computeSignature('a', 'b', 'c', 'd'));
  });

  it('verifyAndDecrypt checks the signature before decrypting', () => {
    const enc = encrypt({ encodingAesKey: KEY, message: 'x', receiveId: RID });
    const base = {
      token: TOKEN,
      encodingAesKey: KEY,
      receiveId: RID,
      timestamp: '1',
      nonce: '2',
      encrypt: enc,
    };
    expect(verifyAndDecrypt({ ...base, signature: 'f'.repeat(40) })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    // Garbage ciphertext with a valid signature reaches decrypt and fails there.
    const garbage = 'AAAA';
    const s = computeSignature(TOKEN, '1', '2', garbage);
    expect(verifyAndDecrypt({ ...base, encrypt: garbage, signature: s })).toEqual({
      ok: false,
      reason: 'bad_length',
    });
  });
});

describe('isTimestampFresh', () => {
  const now = 1_700_000_000_000;
  const t = (s: number) => String(s);

  it('accepts now and the window edges', () => {
    expect(isTimestampFresh(t(1_700_000_000), now)).toBe(true);
    expect(isTimestampFresh(t(1_700_000_000 - 300), now)).toBe(true);
    expect(isTimestampFresh(t(1_700_000_000 + 300), now)).toBe(true);
  });

  it('rejects stale and future timestamps beyond the window', () => {
    expect(isTimestampFresh(t(1_700_000_000 - 301), now)).toBe(false);
    expect(isTimestampFresh(t(1_700_000_000 + 301), now)).toBe(false);
    expect(isTimestampFresh('0', now)).toBe(false);
  });

  it('honours a custom window', () => {
    expect(isTimestampFresh(t(1_700_000_000 - 30), now, 10)).toBe(false);
    expect(isTimestampFresh(t(1_700_000_000 - 30), now, 60)).toBe(true);
  });

  it.each([
    '',
    'abc',
    '-1',
    '+1700000000',
    '1.7e9',
    '1700000000.5',
    ' 1700000000',
    '1700000000\n',
    '0x6553f100',
    '１７',
  ])('rejects non-decimal %j', (s) => {
    expect(isTimestampFresh(s, now)).toBe(false);
  });

  it('rejects non-finite clocks and windows', () => {
    expect(isTimestampFresh('1700000000', Number.NaN)).toBe(false);
    expect(isTimestampFresh('1700000000', now, Number.POSITIVE_INFINITY)).toBe(false);
    expect(isTimestampFresh('1700000000', now, -1)).toBe(false);
  });
});

describe('fuzz', () => {
  it('decrypt never throws and never accepts arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
        expect(dec(s).ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('decrypt never throws and never accepts arbitrary well-formed base64', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), (bytes) => {
        expect(dec(Buffer.from(bytes).toString('base64')).ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('decrypt never throws on random block-aligned ciphertext (reaches padding/length/id checks)', () => {
    const aligned = fc
      .integer({ min: 1, max: 8 })
      .chain((n) => fc.uint8Array({ minLength: 32 * n, maxLength: 32 * n }));
    fc.assert(
      fc.property(aligned, (bytes) => {
        expect(dec(Buffer.from(bytes).toString('base64')).ok).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('any edit to a signed ciphertext is rejected by the signature (CBC alone is malleable)', () => {
    const enc = encrypt({ encodingAesKey: KEY, message: 'pay 100', receiveId: RID });
    const signature = computeSignature(TOKEN, '1', '2', enc);
    const base = { token: TOKEN, encodingAesKey: KEY, receiveId: RID, timestamp: '1', nonce: '2', signature };
    fc.assert(
      fc.property(fc.nat({ max: enc.length - 1 }), fc.constantFrom(...'ABCDabcd0123+/='), (i, ch) => {
        fc.pre(enc[i] !== ch);
        const tampered = enc.slice(0, i) + ch + enc.slice(i + 1);
        expect(verifyAndDecrypt({ ...base, encrypt: tampered })).toEqual({
          ok: false,
          reason: 'bad_signature',
        });
      }),
    );
  });

  it('verifySignature never throws and rejects arbitrary signatures', () => {
    const s = fc.string({ unit: 'binary', maxLength: 80 });
    fc.assert(
      fc.property(s, s, s, s, s, (token, timestamp, nonce, enc, signature) => {
        const expected = computeSignature(token, timestamp, nonce, enc);
        fc.pre(signature !== expected);
        expect(verifySignature({ token, timestamp, nonce, encrypt: enc, signature })).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('isTimestampFresh never throws', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 30 }), fc.double(), (s, now) => {
        expect(typeof isTimestampFresh(s, now)).toBe('boolean');
      }),
    );
  });

  it('round-trips arbitrary unicode messages and receive ids', () => {
    const text = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.string({ unit: 'binary' }));
    fc.assert(
      fc.property(text, text, (message, receiveId) => {
        const enc = encrypt({ encodingAesKey: KEY, message, receiveId });
        expect(Buffer.from(enc, 'base64').length % 32).toBe(0);
        expect(dec(enc, receiveId)).toEqual({ ok: true, message });
      }),
      { numRuns: 300 },
    );
  });
});
