import { APICallError } from '@ai-sdk/provider';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyModelError } from '../../agents/openai';
import { egressSendFailure } from '../../channels/send-result';
import {
  EgressBodyTooLargeError,
  EgressDeniedError,
  egressErrorOf,
  egressFetch,
  isInternalAddress,
  setEgressPolicy,
  setEgressResolver,
} from '../../lib/egress';

// Under public_only a connection to any of these is refused; the IPv6 forms that carry an IPv4
// address reach that address, so they are judged by it (or refused outright where no public host
// ever uses the form).
describe('isInternalAddress', () => {
  it.each([
    ['IPv4 loopback', '127.0.0.1'],
    ['IPv4 private', '10.1.2.3'],
    ['IPv4 private 172.16/12', '172.20.0.1'],
    ['IPv4 private 192.168/16', '192.168.1.1'],
    ['IPv4 link-local (metadata)', '169.254.169.254'],
    ['IPv4 shared address space', '100.64.0.1'],
    ['IPv4 this network', '0.0.0.0'],
    ['IPv6 loopback', '::1'],
    ['IPv6 unspecified', '::'],
    ['IPv6 unique local', 'fd00::1'],
    ['IPv6 link-local', 'fe80::1'],
    ['IPv6 link-local with a zone id', 'fe80::1%eth0'],
    ['IPv6 site-local (deprecated)', 'fec0::1'],
    ['IPv6 multicast', 'ff02::1'],
    ['IPv4-mapped, dotted', '::ffff:127.0.0.1'],
    ['IPv4-mapped, hex', '::ffff:7f00:1'],
    ['IPv4-mapped, hex, upper case', '::FFFF:7F00:1'],
    ['IPv4-mapped, fully written', '0:0:0:0:0:ffff:7f00:1'],
    ['IPv4-mapped private, hex', '::ffff:a00:1'],
    ['IPv4-mapped metadata, hex', '::ffff:a9fe:a9fe'],
    ['IPv4-mapped of a public address (never on the wire)', '::ffff:8.8.8.8'],
    ['IPv4-compatible, dotted', '::127.0.0.1'],
    ['IPv4-compatible, hex', '::7f00:1'],
    ['IPv4-compatible of a public address (deprecated form)', '::8.8.8.8'],
    ['NAT64 of loopback, dotted', '64:ff9b::127.0.0.1'],
    ['NAT64 of loopback, hex', '64:ff9b::7f00:1'],
    ['NAT64 of the metadata address', '64:ff9b::a9fe:a9fe'],
    ['NAT64 of a private address', '64:ff9b::10.0.0.1'],
    ['local-use NAT64 prefix', '64:ff9b:1::808:808'],
    ['6to4 of loopback', '2002:7f00:1::'],
    ['6to4 of a private address', '2002:c0a8:101::1'],
    ['6to4 of the metadata address', '2002:a9fe:a9fe::1'],
    ['6to4 of this network', '2002:0:1::'],
    ['IPv4-translated (SIIT), hex', '::ffff:0:7f00:1'],
    ['IPv4-translated (SIIT), dotted', '::ffff:0:127.0.0.1'],
    ['Teredo', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
    ['IPv4 benchmarking', '198.18.0.1'],
    ['IPv4 broadcast', '255.255.255.255'],
    ['IPv4 multicast', '224.0.0.1'],
    ['IPv4 top of 10/8', '10.255.255.255'],
    ['IPv4 top of 172.16/12', '172.31.255.255'],
    ['IPv4 top of 100.64/10', '100.127.255.255'],
    ['IPv4 top of 0/8', '0.255.255.255'],
    ['IPv6 top of fc00::/7', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    ['IPv6 top of fe80::/10', 'febf::1'],
    ['not an address', 'example.com'],
  ])('%s (%s) is internal', (_name, address) => {
    expect(isInternalAddress(address)).toBe(true);
  });

  it.each([
    ['IPv4 public', '93.184.216.34'],
    ['IPv4 public DNS', '8.8.8.8'],
    ['IPv6 public', '2606:4700::1111'],
    ['IPv6 public, fully written', '2001:4860:4860:0:0:0:0:8888'],
    ['NAT64 of a public address, dotted', '64:ff9b::8.8.8.8'],
    ['NAT64 of a public address, hex', '64:ff9b::808:808'],
    ['6to4 of a public address', '2002:808:808::1'],
    ['just past 172.16/12', '172.32.0.1'],
    ['just past 100.64/10', '100.128.0.1'],
    ['just below 172.16/12', '172.15.255.255'],
    ['just past fc00::/7', 'fe00::1'],
    ['IPv6 documentation, next to Teredo', '2001:db8::1'],
    ['IPv6 public, next to Teredo', '2001:4860::8888'],
    ['a documentation IPv4 (TEST-NET-1, unroutable but not internal)', '192.0.2.1'],
  ])('%s (%s) is not internal', (_name, address) => {
    expect(isInternalAddress(address)).toBe(false);
  });
});

// The WHATWG URL parser (which fetch uses) turns every IPv4 spelling into the dotted quad before
// the host is checked, and every IPv6 spelling into its compressed hex form: prove it, do not assume.
describe('URL host forms', () => {
  it.each([
    ['decimal', 'http://2130706433/'],
    ['octal', 'http://0177.0.0.1/'],
    ['hex, short', 'http://0x7f.1/'],
    ['hex, whole', 'http://0x7f000001/'],
    ['octal, whole', 'http://017700000001/'],
    ['short', 'http://127.1/'],
    ['zero-padded', 'http://127.000.000.001/'],
    ['trailing dot', 'http://127.0.0.1./'],
    ['percent-encoded', 'http://%31%32%37.0.0.1/'],
    ['full-width digits', 'http://１２７.０.０.１/'],
  ])('%s IPv4 (%s) is parsed as 127.0.0.1', (_name, url) => {
    expect(new URL(url).hostname).toBe('127.0.0.1');
  });

  it.each([
    ['http://[::ffff:127.0.0.1]/', '[::ffff:7f00:1]'],
    ['http://[0:0:0:0:0:ffff:7f00:1]/', '[::ffff:7f00:1]'],
    ['http://[::FFFF:7F00:1]/', '[::ffff:7f00:1]'],
    ['http://[64:ff9b::127.0.0.1]/', '[64:ff9b::7f00:1]'],
    ['http://[::127.0.0.1]/', '[::7f00:1]'],
    ['http://[0::1]/', '[::1]'],
  ])('IPv6 %s is parsed as %s', (url, host) => {
    expect(new URL(url).hostname).toBe(host);
  });

  it('zone ids and malformed hosts do not parse (refused as invalid URLs)', () => {
    for (const url of [
      'http://[fe80::1%25eth0]/',
      'http://1.2.3.4.5/',
      'http://0x100000000/',
      'http://[::1/',
    ]) {
      expect(() => new URL(url), url).toThrow(TypeError);
    }
  });
});

describe('egressFetch under public_only', () => {
  afterEach(() => {
    setEgressPolicy('allow_private');
    setEgressResolver(undefined);
  });

  // No server is needed: each of these is refused before any lookup or connection.
  it.each([
    'http://127.0.0.1/',
    'http://2130706433/',
    'http://0177.0.0.1/',
    'http://0x7f.1/',
    'http://127.1/',
    'http://127.0.0.1./',
    'http://0/',
    'http://10.0.0.1/',
    'http://172.16.0.1/',
    'http://192.168.0.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://[::1]/',
    'http://[::]/',
    'http://[fd00::1]/',
    'http://[fe80::1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:169.254.169.254]/',
    'http://[::ffff:0:7f00:1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[64:ff9b::169.254.169.254]/',
    'http://[2002:7f00:1::]/',
    'http://[2002:a9fe:a9fe::]/',
    'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
    'https://[::1]:8443/',
  ])('%s is refused before any lookup', async (url) => {
    const asked: string[] = [];
    setEgressResolver(async (host) => {
      asked.push(host);
      return [{ address: '93.184.216.34', family: 4 }];
    });
    setEgressPolicy('public_only');
    const err = await egressFetch(url, { maxResponseBytes: 1024 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EgressDeniedError);
    expect((err as Error).message).toContain('internal address');
    expect(asked).toEqual([]);
  });

  it('refuses a URL that does not parse and a protocol other than http(s), before any lookup', async () => {
    setEgressPolicy('public_only');
    for (const url of [
      'http://[fe80::1%25eth0]/',
      'file:///etc/passwd',
      'gopher://127.0.0.1:70/',
      'ftp://x/',
    ]) {
      await expect(egressFetch(url), url).rejects.toBeInstanceOf(EgressDeniedError);
    }
  });

  it('needs a cap that bounds: NaN, negative or fractional caps are refused', async () => {
    for (const maxResponseBytes of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY]) {
      await expect(egressFetch('http://127.0.0.1:9/', { maxResponseBytes })).rejects.toThrow(TypeError);
    }
  });
});

describe('a body over the cap, as each caller classifies it', () => {
  const tooLarge = new EgressBodyTooLargeError(8 * 1024 * 1024, 200);

  it('is found along the cause chain the AI SDK wraps it in', () => {
    const wrapped = new APICallError({
      message: 'Failed to process successful response',
      cause: tooLarge,
      url: 'http://x/v1/chat/completions',
      requestBodyValues: {},
      statusCode: 200,
    });
    expect(egressErrorOf(wrapped)).toBe(tooLarge);
  });

  it('model: a permanent response_too_large (the same call gets the same answer)', () => {
    const wrapped = new APICallError({
      message: 'Failed to process successful response',
      cause: tooLarge,
      url: 'http://x/v1/chat/completions',
      requestBodyValues: {},
      statusCode: 200,
    });
    expect(classifyModelError(wrapped, null)).toMatchObject({
      name: 'ModelError',
      retryable: false,
      reasonClass: 'response_too_large',
      statusCode: 200,
    });
  });

  it('channel send: unknown (the peer got the send), never failed or retried blindly', () => {
    expect(egressSendFailure(tooLarge)).toEqual({ kind: 'unknown', reasonClass: 'response_too_large' });
  });
});
