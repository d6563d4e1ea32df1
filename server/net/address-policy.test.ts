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
  // NAT64 of a loopback address
  ["64:ff9b::127.0.0.1", "a loopback address"],
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
