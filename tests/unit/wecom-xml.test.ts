import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decrypt } from '../../channels/wecom/crypto';
import { MAX_XML_BYTES, parseEnvelope, parseInnerMessage } from '../../channels/wecom/xml';
import vectors from '../fixtures/wecom/vectors.json';

const { official, generated } = vectors;

const cdata = (s: string) => `<![CDATA[${s}]]>`;
const inner = (fields: Record<string, string>) =>
  `<xml>${Object.entries(fields)
    .map(([k, v]) => `<${k}>${v}</${k}>`)
    .join('')}</xml>`;
const textMsg = (content: string, extra: Record<string, string> = {}) =>
  inner({
    ToUserName: cdata('wwcorp'),
    FromUserName: cdata('zhangsan'),
    CreateTime: '1700000000',
    MsgType: cdata('text'),
    Content: cdata(content),
    MsgId: '12345678901234567890',
    AgentID: '1000002',
    ...extra,
  });

describe('parseEnvelope', () => {
  it('parses the official sample body', () => {
    const r = parseEnvelope(official.message.body);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.toUser).toBe('wx5823bf96d3bd56c7');
    expect(r.value.agentId).toBe('218');
    expect(r.value.encrypt).toMatch(/^RypEvHKD8QQ.*\+qN\+E7Q==$/);
    // and the extracted ciphertext decrypts to the published plaintext
    expect(
      decrypt({
        encodingAesKey: official.encodingAesKey,
        encrypt: r.value.encrypt,
        expectedReceiveId: official.receiveId,
      }),
    ).toEqual({ ok: true, message: official.message.plaintext });
  });

  it('tolerates whitespace between elements and a missing AgentID / ToUserName', () => {
    const r = parseEnvelope(`<xml>\n  <Encrypt>${cdata('QUJD')}</Encrypt>\n</xml>\n`);
    expect(r).toEqual({ ok: true, value: { encrypt: 'QUJD' } });
    expect(r.ok && Object.keys(r.value)).toEqual(['encrypt']);
  });

  it('accepts a plain (non-CDATA) AgentID and an XML declaration', () => {
    const r = parseEnvelope(
      `<?xml version="1.0" encoding="UTF-8"?><xml><Encrypt>QUJD</Encrypt><AgentID>42</AgentID></xml>`,
    );
    expect(r.ok && r.value.agentId).toBe('42');
  });

  it.each([
    ['missing Encrypt', `<xml><ToUserName>${cdata('x')}</ToUserName></xml>`],
    ['empty Encrypt', `<xml><Encrypt>${cdata('')}</Encrypt></xml>`],
    ['duplicate Encrypt', `<xml><Encrypt>QUJD</Encrypt><Encrypt>REVG</Encrypt></xml>`],
    ['nested Encrypt', `<xml><Encrypt><a>QUJD</a></Encrypt></xml>`],
    ['wrong root', `<root><Encrypt>QUJD</Encrypt></root>`],
    ['a second top-level element', `<xml><Encrypt>QUJD</Encrypt></xml><other/>`],
    ['empty root', `<xml/>`],
    ['text-only root', `<xml>QUJD</xml>`],
  ])('invalid_shape: %s', (_name, xml) => {
    expect(parseEnvelope(xml)).toEqual({ ok: false, reason: 'invalid_shape' });
  });

  it.each([
    ['empty', ''],
    ['not xml', 'hello'],
    ['JSON', '{"Encrypt":"QUJD"}'],
    ['unclosed tag', `<xml><Encrypt>QUJD</xml>`],
    ['unterminated CDATA', `<xml><Encrypt><![CDATA[QUJD</Encrypt></xml>`],
    ['two <xml> roots', `<xml><Encrypt>QUJD</Encrypt></xml><xml><Encrypt>REVG</Encrypt></xml>`],
    ['unterminated attribute quote', `<xml a="1><Encrypt>QUJD</Encrypt></xml>`],
  ])('malformed: %s', (_name, xml) => {
    expect(parseEnvelope(xml)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('a <__proto__> element neither parses nor pollutes Object.prototype', () => {
    const r = parseEnvelope(
      `<xml><__proto__><polluted>yes</polluted></__proto__><Encrypt>QUJD</Encrypt></xml>`,
    );
    expect(r.ok).toBe(false);
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('DTD / entity hardening', () => {
  const billionLaughs = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<xml><Encrypt>&lol3;</Encrypt></xml>`;
  const xxe = `<?xml version="1.0"?><!DOCTYPE xml [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><xml><Encrypt>&xxe;</Encrypt></xml>`;

  it.each([
    ['billion laughs', billionLaughs],
    ['external entity (XXE)', xxe],
    ['bare DOCTYPE', `<!DOCTYPE xml><xml><Encrypt>QUJD</Encrypt></xml>`],
    ['lowercase doctype', `<!doctype xml><xml><Encrypt>QUJD</Encrypt></xml>`],
    ['DOCTYPE after the root opens', `<xml><!DOCTYPE x [<!ENTITY a "b">]><Encrypt>&a;</Encrypt></xml>`],
    ['bare ENTITY declaration', `<xml><!ENTITY a "b"><Encrypt>QUJD</Encrypt></xml>`],
    ['comment', `<xml><!-- hi --><Encrypt>QUJD</Encrypt></xml>`],
    [
      'DOCTYPE hidden behind a fake CDATA in an attribute',
      `<xml a="<![CDATA["><!DOCTYPE x>]]><Encrypt>QUJD</Encrypt></xml>`,
    ],
    [
      'DOCTYPE hidden behind a CDATA opener that only a quote-blind scan would see',
      `<xml b=">" c="<![CDATA["><!DOCTYPE x>]]><Encrypt>QUJD</Encrypt></xml>`,
    ],
    ['DOCTYPE after a quote in a closing tag', `<xml><Encrypt>QUJD</Encrypt "><!DOCTYPE x>"></xml>`],
    [
      'DOCTYPE hidden behind a fake comment in a PI',
      `<?pi "<!--"?><!DOCTYPE x><xml><Encrypt>QUJD</Encrypt></xml>`,
    ],
  ])('rejects %s', (_name, xml) => {
    expect(parseEnvelope(xml)).toEqual({ ok: false, reason: 'forbidden_markup' });
    expect(parseInnerMessage(xml)).toEqual({ ok: false, reason: 'forbidden_markup' });
  });

  it('leaves entity references unexpanded (processEntities: false)', () => {
    const r = parseInnerMessage(textMsg('x').replace(cdata('x'), 'a &amp; &lt;b&gt; &#65; &foo;'));
    expect(r.ok && r.value.content).toBe('a &amp; &lt;b&gt; &#65; &foo;');
  });

  it('still accepts chat text that merely mentions DOCTYPE/ENTITY inside CDATA', () => {
    const content = '<!DOCTYPE html><!ENTITY x "y"> <!-- not a comment -->';
    const r = parseInnerMessage(textMsg(content));
    expect(r.ok && r.value.content).toBe(content);
  });
});

describe('size cap', () => {
  it('exports a 64 KiB cap', () => {
    expect(MAX_XML_BYTES).toBe(64 * 1024);
  });

  it('accepts a document of exactly MAX_XML_BYTES bytes', () => {
    const shell = textMsg('');
    const xml = textMsg('a'.repeat(MAX_XML_BYTES - shell.length));
    expect(Buffer.byteLength(xml)).toBe(MAX_XML_BYTES);
    expect(parseInnerMessage(xml).ok).toBe(true);
  });

  it('rejects one byte more', () => {
    const shell = textMsg('');
    expect(parseInnerMessage(textMsg('a'.repeat(MAX_XML_BYTES - shell.length + 1)))).toEqual({
      ok: false,
      reason: 'too_large',
    });
  });

  it('counts UTF-8 bytes, not UTF-16 units', () => {
    const xml = textMsg('中'.repeat(MAX_XML_BYTES / 3 + 1)); // ~22k chars, >64 KiB in UTF-8
    expect(xml.length).toBeLessThan(MAX_XML_BYTES);
    expect(parseInnerMessage(xml)).toEqual({ ok: false, reason: 'too_large' });
  });

  it('rejects huge inputs without scanning them', () => {
    const big = `<xml><Encrypt>${'A'.repeat(10 * 1024 * 1024)}</Encrypt></xml>`;
    expect(parseEnvelope(big)).toEqual({ ok: false, reason: 'too_large' });
  });

  it('stays fast on pathological input at the cap', () => {
    const cases: Array<[string, string]> = [
      ['<'.repeat(MAX_XML_BYTES), 'malformed'],
      [`<a "${'x'.repeat(MAX_XML_BYTES - 10)}`, 'malformed'],
      ['<![CDATA['.repeat(7000), 'malformed'],
      [`<xml>${'<a>'.repeat(20_000)}`, 'malformed'],
      // nesting beyond fast-xml-parser's maxNestedTags (100) makes it throw; we catch it
      [`<xml>${'<a>'.repeat(5_000)}${'</a>'.repeat(5_000)}<Encrypt>QUJD</Encrypt></xml>`, 'malformed'],
      [`<xml>${'<Encrypt/>'.repeat(6_000)}</xml>`, 'invalid_shape'],
    ];
    const start = performance.now();
    for (const [xml, reason] of cases) {
      expect(xml.length).toBeLessThanOrEqual(MAX_XML_BYTES);
      expect(parseEnvelope(xml)).toEqual({ ok: false, reason });
    }
    expect(performance.now() - start).toBeLessThan(2000);
  });

  it('20k unexpanded entity references stay literal (decrypt then rejects them as bad base64)', () => {
    const r = parseEnvelope(`<xml><Encrypt>${'&a;'.repeat(20_000)}</Encrypt></xml>`);
    expect(r.ok && r.value.encrypt.length).toBe(60_000);
  });
});

describe('parseInnerMessage', () => {
  it('parses the official decrypted sample, keeping MsgId exact', () => {
    const r = parseInnerMessage(official.message.plaintext);
    expect(r).toEqual({
      ok: true,
      value: {
        msgType: 'text',
        fromUser: 'mycreate',
        toUser: 'wx5823bf96d3bd56c7',
        createTime: '1409659813',
        content: 'hello',
        msgId: '4561255354251345929', // > 2^53: a number would have rounded it
        agentId: '218',
      },
    });
    expect(Number('4561255354251345929').toString()).not.toBe('4561255354251345929');
  });

  it('keeps MsgId "12345678901234567890" as an exact string and preserves unicode CDATA', () => {
    const r = parseInnerMessage(generated.plaintext);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.msgId).toBe('12345678901234567890');
    expect(r.value.content).toBe('你好 🌏 a+b/c=d');
    expect(r.value.agentId).toBe('1000002');
  });

  it('preserves leading/trailing whitespace and newlines in Content', () => {
    const r = parseInnerMessage(textMsg('  two\nlines  '));
    expect(r.ok && r.value.content).toBe('  two\nlines  ');
  });

  it('does not trim plain (non-CDATA) text either', () => {
    const r = parseInnerMessage(textMsg('x').replace(cdata('x'), '  plain  '));
    expect(r.ok && r.value.content).toBe('  plain  ');
  });

  it('keeps an empty Content as an empty string', () => {
    const r = parseInnerMessage(textMsg(''));
    expect(r.ok && r.value.content).toBe('');
  });

  it('reassembles content that WeCom had to split around "]]>"', () => {
    const xml = textMsg('x').replace(cdata('x'), `${cdata('a]]')}${cdata('>b')}`);
    const r = parseInnerMessage(xml);
    expect(r.ok && r.value.content).toBe('a]]>b');
  });

  it('parses an event with ChatId and omits absent fields', () => {
    const xml = inner({
      ToUserName: cdata('wwcorp'),
      FromUserName: cdata('sys'),
      CreateTime: '1700000000',
      MsgType: cdata('event'),
      Event: cdata('enter_agent'),
      AgentID: '1000002',
      ChatId: cdata('wrkSFfCgAAxxxx'),
      EventKey: cdata(''),
    });
    expect(parseInnerMessage(xml)).toEqual({
      ok: true,
      value: {
        msgType: 'event',
        fromUser: 'sys',
        toUser: 'wwcorp',
        createTime: '1700000000',
        agentId: '1000002',
        event: 'enter_agent',
        chatId: 'wrkSFfCgAAxxxx',
      },
    });
  });

  it('parses an image message', () => {
    const xml = inner({
      ToUserName: cdata('wwcorp'),
      FromUserName: cdata('zhangsan'),
      CreateTime: '1700000000',
      MsgType: cdata('image'),
      PicUrl: cdata('https://example.invalid/p.jpg'),
      MediaId: cdata('media_1'),
      MsgId: '1',
    });
    const r = parseInnerMessage(xml);
    expect(r.ok && r.value).toMatchObject({
      msgType: 'image',
      picUrl: 'https://example.invalid/p.jpg',
      mediaId: 'media_1',
    });
  });

  it.each([
    ['missing FromUserName', { FromUserName: '' }],
    ['non-numeric CreateTime', { CreateTime: 'yesterday' }],
    ['CreateTime with a sign', { CreateTime: '-1' }],
    ['missing MsgType', { MsgType: '' }],
    ['Content as an element', { Content: '<b>x</b>' }],
  ])('invalid_shape: %s', (_name, override) => {
    expect(parseInnerMessage(textMsg('x', override))).toEqual({ ok: false, reason: 'invalid_shape' });
  });

  it('invalid_shape: duplicate Content', () => {
    const xml = textMsg('a').replace('</xml>', `<Content>${cdata('b')}</Content></xml>`);
    expect(parseInnerMessage(xml)).toEqual({ ok: false, reason: 'invalid_shape' });
  });

  it('the envelope and the inner message are not interchangeable', () => {
    expect(parseInnerMessage(official.message.body).ok).toBe(false);
    expect(parseEnvelope(official.message.plaintext).ok).toBe(false);
  });
});

describe('fuzz', () => {
  const tokens = fc.constantFrom(
    '<xml>',
    '</xml>',
    '<Encrypt>',
    '</Encrypt>',
    '<Content>',
    '</Content>',
    '<MsgType>',
    '</MsgType>',
    '<![CDATA[',
    ']]>',
    '<!DOCTYPE x [',
    '<!ENTITY a "b">',
    '<!--',
    '-->',
    '<?xml version="1.0"?>',
    '&a;',
    '&amp;',
    '"',
    "'",
    '<',
    '>',
    '/>',
    '=',
    ' a="1"',
    'QUJD',
    '12345678901234567890',
    '__proto__',
    '<__proto__>',
    '<constructor>',
    '中文',
    '\n',
  );
  const xmlish = fc.array(tokens, { maxLength: 40 }).map((t) => t.join(''));

  it('arbitrary strings never throw and never parse', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => {
        expect(parseEnvelope(s).ok).toBe(false);
        expect(parseInnerMessage(s).ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('XML-ish token soup never throws; any accepted envelope has a non-empty string Encrypt', () => {
    fc.assert(
      fc.property(xmlish, (s) => {
        const e = parseEnvelope(s);
        if (e.ok) expect(typeof e.value.encrypt).toBe('string');
        const m = parseInnerMessage(s);
        expect(m.ok).toBe(false); // no token soup can supply all required inner fields
      }),
      { numRuns: 2000 },
    );
  });

  it('a DOCTYPE/ENTITY after complete markup is always rejected, whatever follows', () => {
    const complete = fc
      .array(
        fc.constantFrom(
          '<xml>',
          '</xml>',
          '<Encrypt>',
          '</Encrypt>',
          '<a b="<!--">',
          '<![CDATA[<!x]]>',
          'QUJD',
          '>',
          '\n',
        ),
      )
      .map((t) => t.join(''));
    const decl = fc.constantFrom('<!DOCTYPE x>', '<!ENTITY a "b">', '<!doctype x>', '<!--');
    fc.assert(
      fc.property(complete, decl, xmlish, (a, d, b) => {
        expect(parseEnvelope(`${a}${d}${b}`)).toEqual({ ok: false, reason: 'forbidden_markup' });
      }),
    );
  });

  it('token soup containing a declaration is never accepted', () => {
    fc.assert(
      fc.property(xmlish, fc.constantFrom('<!DOCTYPE x>', '<!ENTITY a "b">'), xmlish, (a, d, b) => {
        expect(parseEnvelope(`${a}${d}${b}`).ok).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('CDATA content round-trips for arbitrary ]]>-free unicode', () => {
    const content = fc.string({ unit: 'grapheme', maxLength: 200 }).filter((s) => !s.includes(']]>'));
    fc.assert(
      fc.property(content, (c) => {
        const r = parseInnerMessage(textMsg(c));
        expect(r.ok && r.value.content).toBe(c);
      }),
      { numRuns: 500 },
    );
  });
});
