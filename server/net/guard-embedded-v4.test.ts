/**
 * IPv6 spellings of private IPv4 addresses (NAT64, 6to4, SIIT, IPv4-compatible, Teredo) are
 * refused by the real guarded connector at dial time, as an IP literal in the URL and as a
 * resolver's answer (a DNS64 resolver hands out exactly such addresses). Nothing is dialled: the
 * loopback-only safety net of guard-fixtures.ts would fail a regressed guard with its own message.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chain, client, failure, fakeLookup, messages, registerGuardHooks } from "./guard-fixtures";
import { RefusedAddressError } from "./guarded-fetch";

registerGuardHooks();

const HINT = "set allowPrivate to allow";

/** [the URL's host, the address as undici hands it to the connector, the kind it is refused as] */
const LITERALS: [host: string, dialled: string, kind: string][] = [
  ["[64:ff9b::127.0.0.1]", "64:ff9b::7f00:1", "a loopback address"],
  ["[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", "a link-local address"],
  ["[64:ff9b:1::a00:1]", "64:ff9b:1::a00:1", "a local-use NAT64 address"],
  ["[2002:7f00:1::]", "2002:7f00:1::", "a loopback address"],
  ["[2002:c0a8:101::1]", "2002:c0a8:101::1", "a private (RFC 1918) address"],
  ["[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1", "a loopback address"],
  ["[::10.0.0.1]", "::a00:1", "a private (RFC 1918) address"],
  ["[2001:0:4136:e378:8000:63bf:80ff:fffe]", "2001:0:4136:e378:8000:63bf:80ff:fffe", "a loopback address"],
];

describe("an IPv6 literal embedding a private IPv4 address is refused at connect time", () => {
  it.each(LITERALS)("http://%s/ is refused as %s (%s)", async (host, dialled, kind) => {
    const err = await failure(client()(`http://${host}:8080/mcp`));
    expect(messages(err)).toContain(`refused: ${dialled}, ${kind}; ${HINT}`);
    expect(chain(err).some((e) => e instanceof RefusedAddressError)).toBe(true);
    expect(messages(err).join("\n")).not.toContain("test safety net");
  });
});

describe("a name resolving to an IPv6 form of a private IPv4 address is refused after DNS", () => {
  /** [a DNS64-style answer, the kind it is refused as] */
  const ANSWERS: [ip: string, kind: string][] = [
    ["64:ff9b::a9fe:a9fe", "a link-local address"],
    ["64:ff9b::10.0.0.1", "a private (RFC 1918) address"],
    ["2002:7f00:1::1", "a loopback address"],
  ];
  for (const [form, autoSelect] of [
    ["all", true],
    ["single", false],
  ] as const) {
    describe(`answered in the ${form} callback form`, () => {
      let previous = true;
      beforeAll(() => {
        previous = net.getDefaultAutoSelectFamily();
        net.setDefaultAutoSelectFamily(autoSelect);
      });
      afterAll(() => {
        net.setDefaultAutoSelectFamily(previous);
      });

      it.each(ANSWERS)("a name resolving to %s is refused as %s", async (ip, kind) => {
        const forms: string[] = [];
        const err = await failure(
          client({ lookup: fakeLookup({ "api.example.test": ip }, forms) })("http://api.example.test:8080/"),
        );
        expect(messages(err)).toContain(`refused: api.example.test resolves to ${ip}, ${kind}; ${HINT}`);
        expect(chain(err).some((e) => e instanceof RefusedAddressError)).toBe(true);
        expect(forms).toEqual([form]);
      });
    });
  }
});
