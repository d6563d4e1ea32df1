import { describe, expect, it } from "vitest";
import { refusedAddressKind } from "./address-policy";

/** [address, the kind it must be refused as] */
const REFUSED: [ip: string, kind: string][] = [
  // loopback
  ["127.0.0.1", "a loopback address"],
  ["127.1.2.3", "a loopback address"],
  ["127.255.255.254", "a loopback address"],
  ["::1", "a loopback address"],
  // RFC 1918
  ["10.0.0.1", "a private (RFC 1918) address"],
  ["10.255.255.255", "a private (RFC 1918) address"],
  ["172.16.0.1", "a private (RFC 1918) address"],
  ["172.31.255.254", "a private (RFC 1918) address"],
  ["192.168.1.1", "a private (RFC 1918) address"],
  // link-local (cloud metadata lives here)
  ["169.254.169.254", "a link-local address"],
  ["169.254.0.1", "a link-local address"],
  ["fe80::1", "a link-local address"],
  ["febf:ffff::1", "a link-local address"],
  // carrier-grade NAT
  ["100.64.0.1", "a carrier-grade NAT address"],
  ["100.127.255.254", "a carrier-grade NAT address"],
  // unspecified
  ["0.0.0.0", "an unspecified ('this network') address"],
  ["0.1.2.3", "an unspecified ('this network') address"],
  ["::", "an unspecified address"],
  // unique-local fc00::/7
  ["fc00::1", "a unique-local address"],
  ["fd12:3456:789a::1", "a unique-local address"],
  ["fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "a unique-local address"],
  // multicast
  ["224.0.0.1", "a multicast address"],
  ["239.255.255.250", "a multicast address"],
  ["ff02::1", "a multicast address"],
  // broadcast
  ["255.255.255.255", "a broadcast address"],
  // IPv4-mapped IPv6 forms are judged as IPv4
  ["::ffff:127.0.0.1", "a loopback address"],
  ["::ffff:7f00:1", "a loopback address"],
  ["::FFFF:7F00:0001", "a loopback address"],
  ["::ffff:10.0.0.1", "a private (RFC 1918) address"],
  ["::ffff:a00:1", "a private (RFC 1918) address"],
  ["::ffff:169.254.169.254", "a link-local address"],
  ["::ffff:100.64.0.1", "a carrier-grade NAT address"],
  ["::ffff:0.0.0.0", "an unspecified ('this network') address"],
  ["::ffff:255.255.255.255", "a broadcast address"],
  // IPv4-translated (SIIT, ::ffff:0:a.b.c.d) forms are judged as IPv4
  ["::ffff:0:127.0.0.1", "a loopback address"],
  ["::ffff:0:7f00:1", "a loopback address"],
  ["::ffff:0:10.0.0.1", "a private (RFC 1918) address"],
  ["::ffff:0:a9fe:a9fe", "a link-local address"],
  ["::ffff:0:c0a8:101", "a private (RFC 1918) address"],
  // IPv4-compatible (deprecated ::a.b.c.d) forms are judged as IPv4
  ["::127.0.0.1", "a loopback address"],
  ["::7f00:1", "a loopback address"],
  ["::10.0.0.1", "a private (RFC 1918) address"],
  ["::a9fe:a9fe", "a link-local address"],
  // NAT64, well-known prefix 64:ff9b::/96: the gateway reaches the embedded IPv4 address
  ["64:ff9b::127.0.0.1", "a loopback address"],
  ["64:ff9b::7f00:1", "a loopback address"],
  ["0064:ff9b:0000:0000:0000:0000:7f00:0001", "a loopback address"],
  ["64:ff9b::10.0.0.1", "a private (RFC 1918) address"],
  ["64:ff9b::ac10:1", "a private (RFC 1918) address"],
  ["64:ff9b::c0a8:101", "a private (RFC 1918) address"],
  ["64:ff9b::169.254.169.254", "a link-local address"],
  ["64:ff9b::a9fe:a9fe", "a link-local address"],
  ["64:ff9b::100.64.0.1", "a carrier-grade NAT address"],
  ["64:ff9b::0.0.0.0", "an unspecified ('this network') address"],
  ["64:ff9b::e000:1", "a multicast address"],
  ["64:ff9b::ffff:ffff", "a broadcast address"],
  // NAT64, local-use prefix 64:ff9b:1::/48: refused whatever it embeds, public or not
  ["64:ff9b:1::127.0.0.1", "a local-use NAT64 address"],
  ["64:ff9b:1::a00:1", "a local-use NAT64 address"],
  ["64:ff9b:1::8.8.8.8", "a local-use NAT64 address"],
  ["64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "a local-use NAT64 address"],
  // 6to4 2002::/16: the IPv4 address is bits 16-47
  ["2002:7f00:1::", "a loopback address"],
  ["2002:7f00:0001:0:0:0:0:1", "a loopback address"],
  ["2002:a00:1::1", "a private (RFC 1918) address"],
  ["2002:c0a8:101:1::1", "a private (RFC 1918) address"],
  ["2002:a9fe:a9fe::", "a link-local address"],
  ["2002:6440:1::", "a carrier-grade NAT address"],
  ["2002::", "an unspecified ('this network') address"],
  ["2002:ffff:ffff::", "a broadcast address"],
  // Teredo 2001::/32: the client's IPv4 address, stored inverted in the last 32 bits
  ["2001:0:4136:e378:8000:63bf:80ff:fffe", "a loopback address"],
  ["2001:0:4136:e378:8000:63bf:f5ff:fffe", "a private (RFC 1918) address"],
  // ::1 and :: written long are the IPv6 loopback and unspecified addresses, not IPv4-compatible
  ["::0:1", "a loopback address"],
  ["::0.0.0.1", "a loopback address"],
  ["0:0:0:0:0:0:0.0.0.1", "a loopback address"],
  ["::0:0", "an unspecified address"],
  ["::0.0.0.0", "an unspecified address"],
  // other special-purpose IPv6 ranges
  ["100::1", "a discard-only address"],
  ["2001:2::1", "a benchmarking address"],
  ["2001:db8::1", "a documentation address"],
  ["3fff::1", "a documentation address"],
  ["fec0::1", "a site-local address"],
  // a zone index does not hide the address
  ["fe80::1%eth0", "a link-local address"],
];

const ALLOWED = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.216.34",
  "172.32.0.1", // just past 172.16.0.0/12
  "100.128.0.1", // just past 100.64.0.0/10
  "169.255.0.1",
  "2606:4700::1111",
  "2001:4860:4860::8888",
  "::ffff:8.8.8.8",
  "::ffff:808:808",
  // IPv6 forms of a public IPv4 address reach that public address
  "::ffff:0:8.8.8.8",
  "64:ff9b::8.8.8.8",
  "64:ff9b::808:808",
  "64:ff9b::5db8:d822", // 93.184.216.34
  "2002:808:808::1",
  "2001:0:4136:e378:8000:63bf:f7f7:f7f7", // Teredo client 8.8.8.8
  // near the embedding prefixes, but outside them
  "64:ff9a::7f00:1",
  "2003:7f00:1::",
];

describe("refusedAddressKind", () => {
  it.each(REFUSED)("refuses %s as %s", (ip, kind) => {
    expect(refusedAddressKind(ip)).toBe(kind);
  });

  it.each(ALLOWED)("allows the public address %s", (ip) => {
    expect(refusedAddressKind(ip)).toBeNull();
  });

  it.each(["", "localhost", "example.com", "127.0.0.1:80", "[::1]", "1.2.3"])(
    "refuses %j, which is not an IP address, as an unparseable address",
    (ip) => {
      expect(refusedAddressKind(ip)).toBe("an unparseable address");
    },
  );

  it("also judges the long, uncompressed forms of IPv6 addresses", () => {
    expect(refusedAddressKind("0:0:0:0:0:0:0:1")).toBe("a loopback address");
    expect(refusedAddressKind("0:0:0:0:0:ffff:7f00:1")).toBe("a loopback address");
    expect(refusedAddressKind("0:0:0:0:0:ffff:10.0.0.1")).toBe("a private (RFC 1918) address");
  });
});
