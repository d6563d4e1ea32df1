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
  // RFC 8215: for translators inside one network only (not globally reachable), and where in it
  // the IPv4 address sits depends on the operator's prefix length: refused whatever it embeds.
  ["64:ff9b:1::", 48, "a local-use NAT64"],
  ["100::", 64, "a discard-only"],
  ["2001:2::", 48, "a benchmarking"],
  ["2001:db8::", 32, "a documentation"],
  ["3fff::", 20, "a documentation"],
  ["fc00::", 7, "a unique-local"],
  ["fe80::", 10, "a link-local"],
  ["fec0::", 10, "a site-local"],
  ["ff00::", 8, "a multicast"],
];

function blockLists(ranges: Range[], family: "ipv4" | "ipv6"): Map<string, BlockList> {
  const lists = new Map<string, BlockList>();
  for (const [prefix, bits, label] of ranges) {
    let list = lists.get(label);
    if (!list) {
      list = new BlockList();
      lists.set(label, list);
    }
    list.addSubnet(prefix, bits, family);
  }
  return lists;
}

const V4_LISTS = blockLists(V4, "ipv4");
const V6_LISTS = blockLists(V6, "ipv6");

/** The eight 16-bit groups of an address `isIP` calls IPv6 (zone dropped, dotted tail folded in). */
function groupsOf(ip: string): number[] {
  let text = ip.toLowerCase();
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a = 0, b = 0, c = 0, d = 0] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string | undefined) =>
    part ? part.split(":").map((h) => Number.parseInt(h, 16)) : [];
  const [head, tail] = text.split("::");
  const first = parse(head);
  if (tail === undefined) return first;
  const last = parse(tail);
  return [...first, ...new Array<number>(8 - first.length - last.length).fill(0), ...last];
}

/**
 * IPv6 forms whose packets end up at an IPv4 address written inside them: [prefix, prefix bits,
 * the group where the 32 bits start, whether they are stored inverted]. Such an address is judged
 * by that IPv4 address, so every private IPv4 address stays refused in each of its IPv6 spellings,
 * and a public one stays allowed (on an IPv6-only host, DNS64 gives every IPv4-only server a NAT64
 * name: the gateway connects to the embedded public address, no further than dialling it directly).
 */
const EMBEDDINGS: [prefix: number[], bits: number, group: number, inverted: boolean][] = [
  [groupsOf("::ffff:0:0"), 96, 6, false], // IPv4-mapped (RFC 4291)
  [groupsOf("::ffff:0:0:0"), 96, 6, false], // IPv4-translated, SIIT (RFC 2765)
  [groupsOf("::"), 96, 6, false], // IPv4-compatible, deprecated (RFC 4291); :: and ::1 are matched before
  [groupsOf("64:ff9b::"), 96, 6, false], // NAT64 well-known prefix (RFC 6052)
  [groupsOf("2002::"), 16, 1, false], // 6to4 (RFC 3056): bits 16-47
  [groupsOf("2001::"), 32, 6, true], // Teredo (RFC 4380): the client's address, bits inverted
];

function inPrefix(groups: number[], prefix: number[], bits: number): boolean {
  for (let i = 0, left = bits; left > 0; i++, left -= 16) {
    const mask = left >= 16 ? 0xffff : (0xffff << (16 - left)) & 0xffff;
    if (((groups[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The IPv4 address an IPv6 address reaches through one of {@link EMBEDDINGS}, if any. */
function embeddedV4(groups: number[]): string | null {
  for (const [prefix, bits, group, inverted] of EMBEDDINGS) {
    if (!inPrefix(groups, prefix, bits)) continue;
    const flip = inverted ? 0xffff : 0;
    const hi = (groups[group] ?? 0) ^ flip;
    const lo = (groups[group + 1] ?? 0) ^ flip;
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

function listed(lists: Map<string, BlockList>, ip: string, family: "ipv4" | "ipv6"): string | null {
  for (const [label, list] of lists) if (list.check(ip, family)) return `${label} address`;
  return null;
}

function v4Kind(ip: string): string | null {
  if (ip === "255.255.255.255") return "a broadcast address";
  return listed(V4_LISTS, ip, "ipv4");
}

/**
 * Why an address may not be dialled without `allowPrivate`, as "a loopback address", or null
 * when it is a public address. IPv6 ranges are checked first (so `::0:1` is the loopback `::1`,
 * not an IPv4-compatible 0.0.0.1); then an IPv6 address that carries an IPv4 address (mapped,
 * SIIT-translated, compatible, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo) is judged as that
 * IPv4 address, with its kind. The local-use NAT64 prefix `64:ff9b:1::/48` is always refused.
 */
export function refusedAddressKind(ip: string): string | null {
  const family = isIP(ip);
  if (family === 0) return "an unparseable address";
  if (family === 4) return v4Kind(ip);
  const groups = groupsOf(ip);
  const kind = listed(V6_LISTS, groups.map((g) => g.toString(16)).join(":"), "ipv6");
  if (kind) return kind;
  const v4 = embeddedV4(groups);
  return v4 ? v4Kind(v4) : null;
}
