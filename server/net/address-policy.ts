import "server-only";
import { BlockList, isIP } from "node:net";

type Range = [prefix: string, bits: number, label: string];

const V4: Range[] = [
  ["0.0.0.0", 8, "an unspecified ('this network')"],
  ["10.0.0.0", 8, "a private (RFC 1918)"],
  ["100.64.0.0", 10, "a carrier-grade NAT"],
  ["127.0.0.0", 8, "a loopback"],
  ["169.254.0.0", 16, "a link-local"],
  ["172.16.0.0", 12, "a private (RFC 1918)"],
  ["192.0.0.0", 24, "a reserved (IETF protocol)"],
  ["192.0.2.0", 24, "a documentation"],
  ["192.88.99.0", 24, "a reserved (6to4 relay)"],
  ["192.168.0.0", 16, "a private (RFC 1918)"],
  ["198.18.0.0", 15, "a benchmarking"],
  ["198.51.100.0", 24, "a documentation"],
  ["203.0.113.0", 24, "a documentation"],
  ["224.0.0.0", 4, "a multicast"],
  ["240.0.0.0", 4, "a reserved"],
];

const V6: Range[] = [
  ["::", 128, "an unspecified"],
  ["::1", 128, "a loopback"],
  ["fc00::", 7, "a unique-local"],
  ["fe80::", 10, "a link-local"],
  ["fec0::", 10, "a site-local"],
  ["ff00::", 8, "a multicast"],
  ["2001:db8::", 32, "a documentation"],
  ["100::", 64, "a discard-only"],
];

const lists = new Map<string, BlockList>();
for (const [prefix, bits, label] of [...V4, ...V6]) {
  let list = lists.get(label);
  if (!list) {
    list = new BlockList();
    lists.set(label, list);
  }
  list.addSubnet(prefix, bits, isIP(prefix) === 6 ? "ipv6" : "ipv4");
}

/** The IPv4 address embedded in an IPv4-mapped, -compatible or NAT64 IPv6 address, if any. */
function embeddedV4(ip: string): string | null {
  const lower = ip.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted?.[1]) return dotted[1];
  const hex = /^(?:::ffff:|::|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex?.[1] && hex[2]) {
    const hi = Number.parseInt(hex[1], 16);
    const lo = Number.parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/**
 * Why an address may not be dialled without `allowPrivate`, as "a loopback address", or null
 * when it is a public address. IPv4 forms embedded in IPv6 are judged as IPv4.
 */
export function refusedAddressKind(ip: string): string | null {
  const family = isIP(ip);
  if (family === 0) return "an unparseable address";
  if (ip === "255.255.255.255") return "a broadcast address";
  if (family === 6) {
    const v4 = embeddedV4(ip);
    if (v4 && isIP(v4) === 4) {
      const inner = refusedAddressKind(v4);
      if (inner) return inner;
    }
  }
  for (const [label, list] of lists) {
    if (list.check(ip, family === 6 ? "ipv6" : "ipv4")) return `${label} address`;
  }
  return null;
}
