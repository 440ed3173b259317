import { describe, expect, it } from 'vitest';
import { isInternalAddress } from '../../lib/egress';

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
  ])('%s (%s) is not internal', (_name, address) => {
    expect(isInternalAddress(address)).toBe(false);
  });
});
