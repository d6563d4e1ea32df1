/**
 * The outbound HTTP guard refuses private addresses (PRODUCT.md §4): every spelling of loopback
 * in a URL, and every private answer a resolver gives, checked at dial time. The servers, the
 * simulated DNS and the loopback-only safety net are in guard-fixtures.ts.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  chain,
  client,
  failure,
  fakeLookup,
  HAS_127_0_0_2,
  type Handler,
  IPV6,
  listen,
  listenTwin,
  messages,
  NO_127_0_0_2,
  NO_IPV6,
  PUBLIC_127_0_0_2,
  registerGuardHooks,
} from "./guard-fixtures";
import { RefusedAddressError } from "./guarded-fetch";

registerGuardHooks();

describe("the tests' own safety net", () => {
  it("stops a dial to a non-loopback address before it leaves", async () => {
    const socket = net.connect({
      host: "leak.test",
      port: 9,
      lookup: fakeLookup({ "leak.test": "10.0.0.1" }),
    });
    const err = await new Promise<Error>((resolve) => socket.once("error", resolve));
    expect(err.message).toBe(
      "test safety net: leak.test resolved to 10.0.0.1, which is not loopback; not dialled",
    );
  });
});

describe("every spelling of loopback in a URL is refused without allowPrivate", () => {
  const LOOPBACK = "a loopback address; set allowPrivate to allow";
  const UNSPECIFIED_V4 = "an unspecified ('this network') address; set allowPrivate to allow";
  /**
   * [url template, listener family it would reach, the refusal, the resolver callback form Node
   * asks for: "none" for IP literals, which never reach the resolver]
   */
  const ROWS: [url: string, family: 4 | 6, refusal: string, form: "all" | "single" | "none"][] = [
    ["http://localhost:PORT/", 4, `refused: localhost resolves to 127.0.0.1, ${LOOPBACK}`, "all"],
    ["http://localhost:PORT/", 4, `refused: localhost resolves to 127.0.0.1, ${LOOPBACK}`, "single"],
    ["http://127.0.0.1:PORT/", 4, `refused: 127.0.0.1, ${LOOPBACK}`, "none"],
    ["http://127.1:PORT/", 4, `refused: 127.0.0.1, ${LOOPBACK}`, "none"],
    ["http://2130706433:PORT/", 4, `refused: 127.0.0.1, ${LOOPBACK}`, "none"],
    ["http://0x7f000001:PORT/", 4, `refused: 127.0.0.1, ${LOOPBACK}`, "none"],
    ["http://0177.0.0.1:PORT/", 4, `refused: 127.0.0.1, ${LOOPBACK}`, "none"],
    ["http://0.0.0.0:PORT/", 4, `refused: 0.0.0.0, ${UNSPECIFIED_V4}`, "none"],
    ["http://0:PORT/", 4, `refused: 0.0.0.0, ${UNSPECIFIED_V4}`, "none"],
    ["http://[::1]:PORT/", 6, `refused: ::1, ${LOOPBACK}`, "none"],
    ["http://[::]:PORT/", 6, "refused: ::, an unspecified address; set allowPrivate to allow", "none"],
    ["http://[::ffff:127.0.0.1]:PORT/", 4, `refused: ::ffff:7f00:1, ${LOOPBACK}`, "none"],
    ["http://[::ffff:7f00:1]:PORT/", 4, `refused: ::ffff:7f00:1, ${LOOPBACK}`, "none"],
  ];

  it.for(ROWS)(
    "%s (reaches IPv%s) is refused: %s [lookup form: %s]",
    async ([template, family, refusal, form], ctx) => {
      // Mapped forms dial through an IPv6 socket too, so every IPv6 spelling needs the IPv6 stack.
      if (!IPV6 && (family === 6 || template.includes("["))) ctx.skip(NO_IPV6);
      const v4 = await listen("127.0.0.1");
      const v6 = IPV6 ? await listen("::1") : null;
      const url = template.replace("PORT", String(family === 6 ? v6?.port : v4.port));
      const previous = net.getDefaultAutoSelectFamily();
      net.setDefaultAutoSelectFamily(form !== "single");
      try {
        const forms: string[] = [];
        const lookup = fakeLookup({ localhost: "127.0.0.1" }, forms);

        const err = await failure(client({ lookup })(url));
        expect(messages(err)).toContain(refusal);
        expect(chain(err).some((e) => e instanceof RefusedAddressError)).toBe(true);
        expect(v4.requests.length + (v6?.requests.length ?? 0)).toBe(0);
        expect(v4.connections + (v6?.connections ?? 0)).toBe(0);
        expect(forms).toEqual(form === "none" ? [] : [form]);

        // Control: the same URL with allowPrivate reaches the real server, so the refusal above
        // is the guard's doing and not an unreachable address.
        const res = await client({ lookup, allowPrivate: true })(url);
        expect(await res.text()).toBe("ok");
        expect(family === 6 ? v6?.requests.length : v4.requests.length).toBe(1);
      } finally {
        net.setDefaultAutoSelectFamily(previous);
      }
    },
  );
});

describe("the dialled address is checked after DNS", () => {
  /** [an answer for a public-looking name, the kind it is refused as] */
  const ANSWERS: [ip: string, kind: string][] = [
    ["10.0.0.1", "a private (RFC 1918) address"],
    ["172.16.0.1", "a private (RFC 1918) address"],
    ["192.168.1.1", "a private (RFC 1918) address"],
    ["169.254.169.254", "a link-local address"],
    ["100.64.0.1", "a carrier-grade NAT address"],
    ["0.0.0.0", "an unspecified ('this network') address"],
    ["fc00::1", "a unique-local address"],
    ["fe80::1", "a link-local address"],
    ["ff02::1", "a multicast address"],
    ["224.0.0.1", "a multicast address"],
    ["255.255.255.255", "a broadcast address"],
    ["192.0.2.1", "a documentation address"],
    ["::ffff:10.0.0.1", "a private (RFC 1918) address"],
  ];
  const FORMS = [
    ["all", true],
    ["single", false],
  ] as const;

  for (const [form, autoSelect] of FORMS) {
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
          client({ lookup: fakeLookup({ "api.example.test": ip }, forms) })(
            "http://api.example.test:8080/mcp",
          ),
        );
        expect(messages(err)).toContain(
          `refused: api.example.test resolves to ${ip}, ${kind}; set allowPrivate to allow`,
        );
        expect(chain(err).some((e) => e instanceof RefusedAddressError)).toBe(true);
        expect(forms).toEqual([form]);
      });
    });
  }

  it("one private address among several answers is enough to refuse", async () => {
    const err = await failure(
      client({ lookup: fakeLookup({ "api.example.test": ["203.0.114.7", "10.0.0.1"] }) })(
        "http://api.example.test:8080/mcp",
      ),
    );
    expect(messages(err)).toContain(
      "refused: api.example.test resolves to 10.0.0.1, a private (RFC 1918) address; set allowPrivate to allow",
    );
  });

  it("a name rebound to loopback on the next connection is refused", async (ctx) => {
    if (!HAS_127_0_0_2) ctx.skip(NO_127_0_0_2);
    // First answer: 127.0.0.2, public under the injected policy; every later answer: 127.0.0.1.
    const closing: Handler = (_req, res) => {
      res.setHeader("connection", "close");
      res.end("ok");
    };
    const [publicHost, loopback] = await listenTwin("127.0.0.2", closing);
    let calls = 0;
    const lookup = fakeLookup({ "rebind.test": () => (calls++ === 0 ? "127.0.0.2" : "127.0.0.1") });
    const fetch = client({ lookup, refuse: PUBLIC_127_0_0_2 });
    const url = `http://rebind.test:${publicHost.port}/`;

    expect(await (await fetch(url)).text()).toBe("ok");
    const err = await failure(fetch(url));
    expect(messages(err)).toContain(
      "refused: rebind.test resolves to 127.0.0.1, a loopback address; set allowPrivate to allow",
    );
    expect(calls).toBe(2);
    expect(publicHost.requests).toHaveLength(1);
    expect(publicHost.connections).toBe(1);
    expect(loopback.requests).toHaveLength(0);
    expect(loopback.connections).toBe(0);
  });

  it("with allowPrivate the same loopback name is dialled and reaches the server", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, lookup: fakeLookup({ localhost: "127.0.0.1" }) });
    expect(await (await fetch(`http://localhost:${server.port}/`)).text()).toBe("ok");
    expect(server.requests).toHaveLength(1);
  });
});
