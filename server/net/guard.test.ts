/**
 * The outbound HTTP guard end to end (issue 4, PRODUCT.md §4): real undici Agents dialling real
 * node:http(s) servers on loopback. Public names are simulated with an injected resolver and,
 * where a reachable "public" host is needed, an injected policy under which 127.0.0.2 counts as
 * public (Linux routes all of 127/8 to lo). Traffic goes to loopback only; the safety net in
 * test/fixtures/net/loopback-only.ts makes any other dial fail before it leaves, so a regressed
 * guard fails these tests instead of sending packets.
 */
import { execFileSync } from "node:child_process";
import type dns from "node:dns";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import net, { isIP } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Agent, EnvHttpProxyAgent, fetch as undiciFetch } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { installLoopbackOnly } from "@/test/fixtures/net/loopback-only";
import { refusedAddressKind } from "./address-policy";
import {
  createGuardedAgent,
  type GuardOptions,
  guardedFetch,
  MAX_REDIRECTS,
  RedirectRefusedError,
  RefusedAddressError,
} from "./guarded-fetch";

// ---------------------------------------------------------------------------------------------
// Loopback servers that record what reached them

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Arrival time, ms (monotonic). */
  at: number;
}

interface TestServer {
  host: string;
  port: number;
  requests: Seen[];
  /** TCP connections accepted. */
  connections: number;
}

type Handler = (req: IncomingMessage, res: ServerResponse, seen: Seen) => void;

const ok: Handler = (_req, res) => {
  res.end("ok");
};

const servers: (http.Server | https.Server)[] = [];

async function listen(
  host: string,
  handler: Handler = ok,
  opts: { port?: number; tls?: { key: string; cert: string } } = {},
): Promise<TestServer> {
  const state: TestServer = { host, port: 0, requests: [], connections: 0 };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const seen: Seen = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      body: "",
      at: performance.now(),
    };
    state.requests.push(seen);
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      seen.body += chunk;
    });
    req.on("end", () => handler(req, res, seen));
  };
  const server = opts.tls ? https.createServer(opts.tls, onRequest) : http.createServer(onRequest);
  server.on("connection", () => {
    state.connections++;
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port: opts.port ?? 0, ipv6Only: isIP(host) === 6 }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  servers.push(server);
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

/** A server on `host` and another on 127.0.0.1 at the same port (so a rebound name would reach it). */
async function listenTwin(host: string, handler: Handler): Promise<[TestServer, TestServer]> {
  for (let attempt = 0; ; attempt++) {
    const first = await listen(host, handler);
    try {
      return [first, await listen("127.0.0.1", ok, { port: first.port })];
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
}

async function canListen(host: string): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen({ host, port: 0, ipv6Only: isIP(host) === 6 }, () => server.close(() => resolve(true)));
  });
}

const IPV6 = await canListen("::1");
const NO_IPV6 = "::1 cannot be bound on this machine, so there is no IPv6 loopback to aim at";
const HAS_127_0_0_2 = await canListen("127.0.0.2");
const NO_127_0_0_2 = "127.0.0.2 cannot be bound here, and it plays the public host";

// ---------------------------------------------------------------------------------------------
// Simulated DNS and the clients under test

type Answer = string | string[];

/**
 * A resolver answering from a table, in the form Node asks for: an array of {address, family}
 * with `all: true` (what Node 20 uses with autoSelectFamily), else (address, family).
 */
function fakeLookup(
  answers: Record<string, Answer | (() => Answer)>,
  forms: string[] = [],
): typeof dns.lookup {
  return ((hostname: string, options: unknown, callback?: (...a: unknown[]) => void) => {
    const cb = (typeof options === "function" ? options : callback) as (...a: unknown[]) => void;
    const all =
      typeof options === "object" && options !== null && (options as dns.LookupOptions).all === true;
    forms.push(all ? "all" : "single");
    const entry = answers[hostname];
    if (entry === undefined) {
      const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      process.nextTick(cb, err);
      return;
    }
    const list = [typeof entry === "function" ? entry() : entry].flat();
    const first = list[0] ?? "";
    if (all)
      process.nextTick(
        cb,
        null,
        list.map((address) => ({ address, family: isIP(address) })),
      );
    else process.nextTick(cb, null, first, isIP(first));
  }) as unknown as typeof dns.lookup;
}

/** 127.0.0.2 plays a public host; everything else is judged by the real policy. */
const PUBLIC_127_0_0_2 = (ip: string) => (ip === "127.0.0.2" ? null : refusedAddressKind(ip));

const agents: Agent[] = [];

function agent(opts: Partial<GuardOptions> = {}): Agent {
  const a = createGuardedAgent({ server: "test", allowPrivate: false, connectTimeoutMs: 2000, ...opts });
  agents.push(a);
  return a;
}

function client(
  opts: Partial<GuardOptions> & { credentialHeaders?: string[]; minIntervalMs?: number } = {},
): (url: string, init?: RequestInit) => Promise<Response> {
  const { credentialHeaders = [], minIntervalMs, ...guard } = opts;
  const a = agent(guard);
  return guardedFetch(a, {
    server: "test",
    allowPrivate: guard.allowPrivate ?? false,
    credentialHeaders,
    minIntervalMs,
  }) as (url: string, init?: RequestInit) => Promise<Response>;
}

/** The rejection of `promise`; fails the test if it resolves. */
async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof Error) return err;
    throw new Error(`rejected with a non-Error: ${String(err)}`);
  }
  throw new Error("expected the request to fail, but it succeeded");
}

/** The error and its causes, outermost first. */
function chain(err: Error): Error[] {
  const out: Error[] = [];
  for (let e: unknown = err; e instanceof Error && out.length < 10; e = e.cause) out.push(e);
  return out;
}

function messages(err: Error): string[] {
  return chain(err).map((e) => e.message);
}

let removeSafetyNet: () => void = () => {};

beforeAll(() => {
  removeSafetyNet = installLoopbackOnly();
});

afterAll(() => {
  removeSafetyNet();
});

afterEach(async () => {
  vi.unstubAllEnvs();
  await Promise.all(agents.splice(0).map((a) => a.destroy()));
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
});

// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------

const DNS = fakeLookup({
  "public-a.test": "127.0.0.2",
  "public-b.test": "127.0.0.2",
  "private.test": "127.0.0.1",
});

/** A server redirecting every request to `location(seen)` with `status`. */
function redirecting(location: (seen: Seen) => string, status = 302): Handler {
  return (_req, res, seen) => {
    res.writeHead(status, { location: location(seen) });
    res.end();
  };
}

describe("redirects", () => {
  beforeEach((ctx) => {
    if (!HAS_127_0_0_2) ctx.skip(NO_127_0_0_2);
  });

  const publicClient = (extra: { credentialHeaders?: string[] } = {}) =>
    client({ lookup: DNS, refuse: PUBLIC_127_0_0_2, ...extra });

  it.each([
    ["allowPrivate: a redirect is an error and its target gets nothing", true],
    ["control without allowPrivate: the same redirect is followed", false],
  ])("%s", async (_name, allowPrivate) => {
    const target = await listen("127.0.0.1");
    const start = await listen(
      "127.0.0.1",
      redirecting(() => `http://127.0.0.1:${target.port}/next`),
    );
    // The control needs a policy under which 127.0.0.1 may be dialled while redirects are followed.
    const fetch = client(allowPrivate ? { allowPrivate: true } : { refuse: () => null });
    const url = `http://127.0.0.1:${start.port}/`;
    if (allowPrivate) {
      const err = await failure(fetch(url));
      expect(err).toBeInstanceOf(RedirectRefusedError);
      expect(err.message).toBe(
        "refused: test answered with a redirect (302); servers with allowPrivate follow no redirects",
      );
      expect(target.requests).toHaveLength(0);
    } else {
      expect(await (await fetch(url)).text()).toBe("ok");
      expect(target.requests).toHaveLength(1);
    }
    expect(start.requests).toHaveLength(1);
  });

  it("public → public on the same origin is followed and keeps the credentials", async () => {
    const server = await listen("127.0.0.2", (req, res) => {
      if (req.url === "/start") {
        res.writeHead(302, { location: "/next" });
        res.end();
      } else res.end("ok");
    });
    const fetch = publicClient({ credentialHeaders: ["X-Api-Key"] });
    const res = await fetch(`http://public-a.test:${server.port}/start`, {
      headers: { authorization: "Bearer same-origin", "x-api-key": "k-same" },
    });
    expect(await res.text()).toBe("ok");
    expect(server.requests.map((r) => r.url)).toEqual(["/start", "/next"]);
    expect(server.requests[1]?.headers.authorization).toBe("Bearer same-origin");
    expect(server.requests[1]?.headers["x-api-key"]).toBe("k-same");
  });

  it.each([
    ["another host and port", "public-b.test"],
    ["the same host on another port", "public-a.test"],
  ])("public → public on another origin (%s) is followed without the credentials", async (_name, host) => {
    const second = await listen("127.0.0.2");
    const first = await listen(
      "127.0.0.2",
      redirecting(() => `http://${host}:${second.port}/next`),
    );
    const fetch = publicClient({ credentialHeaders: ["X-Api-Key"] });
    const headers = {
      authorization: "Bearer to-first-only",
      "x-api-key": "k-first-only",
      cookie: "session=first-only",
      "mcp-session-id": "sess-first-only",
      "x-trace": "kept",
    };
    const res = await fetch(`http://public-a.test:${first.port}/start`, { headers });
    expect(await res.text()).toBe("ok");

    expect(first.requests).toHaveLength(1);
    expect(first.requests[0]?.headers).toMatchObject(headers);
    expect(second.requests).toHaveLength(1);
    const got = second.requests[0]?.headers ?? {};
    for (const name of ["authorization", "x-api-key", "cookie", "mcp-session-id"]) {
      expect(got[name], name).toBeUndefined();
    }
    expect(got["x-trace"]).toBe("kept");
  });

  it.for<[name: string, location: string, refusal: string]>([
    [
      "a private name",
      "http://private.test:PORT/",
      "refused: private.test resolves to 127.0.0.1, a loopback address",
    ],
    ["a loopback IP literal", "http://127.0.0.1:PORT/", "refused: 127.0.0.1, a loopback address"],
    [
      "a mapped loopback literal",
      "http://[::ffff:127.0.0.1]:PORT/",
      "refused: ::ffff:7f00:1, a loopback address",
    ],
  ])(
    "public → %s is refused at dial and the private server gets nothing",
    async ([, template, refusal], ctx) => {
      if (!IPV6 && template.includes("[")) ctx.skip(NO_IPV6);
      const privateServer = await listen("127.0.0.1");
      const location = template.replace("PORT", String(privateServer.port));
      const start = await listen(
        "127.0.0.2",
        redirecting(() => location),
      );
      const url = `http://public-a.test:${start.port}/`;

      const err = await failure(publicClient()(url));
      expect(messages(err)).toContain(`${refusal}; set allowPrivate to allow`);
      expect(privateServer.requests).toHaveLength(0);
      expect(privateServer.connections).toBe(0);
      expect(start.requests).toHaveLength(1);

      // Control: with a policy that refuses nothing, the hop does reach the private server.
      expect(await (await client({ lookup: DNS, refuse: () => null })(url)).text()).toBe("ok");
      expect(privateServer.requests).toHaveLength(1);
    },
  );

  it.each([
    [MAX_REDIRECTS, "followed"],
    [MAX_REDIRECTS + 1, "refused"],
  ] as const)("a chain of %i redirects is %s", async (hops, outcome) => {
    // /hop/0 → /hop/1 → … → /hop/{hops}, which answers ok.
    const server = await listen("127.0.0.2", (req, res) => {
      const n = Number(req.url?.split("/")[2]);
      if (n < hops) {
        res.writeHead(302, { location: `/hop/${n + 1}` });
        res.end();
      } else res.end("ok");
    });
    const result = publicClient()(`http://public-a.test:${server.port}/hop/0`);
    if (outcome === "followed") {
      expect(await (await result).text()).toBe("ok");
      expect(server.requests).toHaveLength(hops + 1);
    } else {
      const err = await failure(result);
      expect(err).toBeInstanceOf(RedirectRefusedError);
      expect(err.message).toBe(`refused: test redirected more than ${MAX_REDIRECTS} times`);
      // The first request and exactly MAX_REDIRECTS follows; the last hop is never requested.
      expect(server.requests.map((r) => r.url)).toEqual(
        Array.from({ length: MAX_REDIRECTS + 1 }, (_, i) => `/hop/${i}`),
      );
    }
  });

  describe("from https", () => {
    let tlsFiles: { key: string; cert: string } | null = null;
    let noTls = "";

    beforeAll(() => {
      try {
        execFileSync("openssl", ["version"], { stdio: "ignore" });
      } catch {
        noTls = "the openssl CLI is not available to make a self-signed certificate";
        return;
      }
      const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-guard-tls-"));
      try {
        execFileSync(
          "openssl",
          [
            ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
            ...["-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem"), "-days", "1"],
            ...["-subj", "/CN=public-a.test", "-addext", "subjectAltName=DNS:public-a.test,IP:127.0.0.2"],
          ],
          { stdio: "ignore" },
        );
        tlsFiles = {
          key: readFileSync(path.join(dir, "key.pem"), "utf8"),
          cert: readFileSync(path.join(dir, "cert.pem"), "utf8"),
        };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it.for<[name: string, scheme: "https" | "http"]>([
      ["https on the same origin is followed", "https"],
      ["plain http is refused and the http target gets nothing", "http"],
    ])("a redirect to %s", async ([, scheme], ctx) => {
      if (!tlsFiles) return ctx.skip(noTls);
      const plain = await listen("127.0.0.2");
      const secure = await listen(
        "127.0.0.2",
        (req, res) => {
          if (req.url === "/start") {
            const to = scheme === "https" ? "/next" : `http://public-b.test:${plain.port}/next`;
            res.writeHead(302, { location: to });
            res.end();
          } else res.end("ok over tls");
        },
        { tls: tlsFiles },
      );
      const fetch = client({ lookup: DNS, refuse: PUBLIC_127_0_0_2, tls: { ca: tlsFiles.cert } });
      const result = fetch(`https://public-a.test:${secure.port}/start`);
      if (scheme === "https") {
        expect(await (await result).text()).toBe("ok over tls");
        expect(secure.requests.map((r) => r.url)).toEqual(["/start", "/next"]);
      } else {
        const err = await failure(result);
        expect(err).toBeInstanceOf(RedirectRefusedError);
        expect(err.message).toBe("refused: test redirected from https to plain http");
        expect(secure.requests).toHaveLength(1);
        expect(plain.requests).toHaveLength(0);
        expect(plain.connections).toBe(0);
      }
    });
  });

  it.each([
    [307, "POST", "payload"],
    [308, "POST", "payload"],
    [303, "GET", ""],
    [302, "GET", ""],
  ] as const)("a POST answered with %i is repeated as %s with body %j", async (status, method, body) => {
    const target = await listen("127.0.0.2");
    const start = await listen(
      "127.0.0.2",
      redirecting(() => `http://public-a.test:${target.port}/next`, status),
    );
    const res = await publicClient()(`http://public-a.test:${start.port}/start`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "payload",
    });
    expect(await res.text()).toBe("ok");
    expect(start.requests[0]).toMatchObject({ method: "POST", body: "payload" });
    expect(target.requests).toHaveLength(1);
    expect(target.requests[0]).toMatchObject({ method, body });
  });
});

// ---------------------------------------------------------------------------------------------

describe("pacing and connection reuse", () => {
  const gaps = (seen: Seen[]) => seen.slice(1).map((r, i) => r.at - (seen[i]?.at ?? 0));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

  it.each([
    ["by default", undefined],
    ["with minIntervalMs 0", 0],
  ])(
    "%s, 20 sequential requests are not spaced and reuse kept-alive connections",
    async (_name, minIntervalMs) => {
      const server = await listen("127.0.0.1");
      const fetch = client({ allowPrivate: true, minIntervalMs });
      for (let i = 0; i < 20; i++) {
        expect(await (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text()).toBe("ok");
      }
      expect(server.requests).toHaveLength(20);
      // Pacing of even 10 ms would put every gap at 10 ms or more; the median resists one slow tick.
      expect(median(gaps(server.requests))).toBeLessThan(10);
      // Kept alive and reused. Not exactly 1: undici's fetch resolves the body a tick before its
      // client is free again, so a request sent at once opens a second connection and back-to-back
      // requests alternate between the two (plain undici does the same). Without keep-alive: 20.
      expect(server.connections).toBeLessThanOrEqual(2);
    },
  );

  it("with minIntervalMs 100, consecutive requests arrive at least ~100 ms apart", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    for (let i = 0; i < 5; i++) await (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text();
    // Pacing spaces the sends; arrivals also carry each request's latency. The first request pays
    // for the TCP connect, so it is left out: the others share one warm connection.
    const spaced = gaps(server.requests.slice(1));
    expect(spaced).toHaveLength(3);
    for (const gap of spaced) expect(gap).toBeGreaterThanOrEqual(95);
    // Spaced requests find the connection free again: exactly one, kept alive.
    expect(server.connections).toBe(1);
  });

  it("with minIntervalMs 100, concurrent requests take turns", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    await (await fetch(`http://127.0.0.1:${server.port}/warm`)).text();
    await Promise.all(
      [0, 1, 2].map(async (i) => (await fetch(`http://127.0.0.1:${server.port}/${i}`)).text()),
    );
    const spaced = gaps(server.requests);
    expect(spaced).toHaveLength(3);
    for (const gap of spaced) expect(gap).toBeGreaterThanOrEqual(90);
  });

  it("with minIntervalMs 100, a stalled event loop does not let the next request through early", async () => {
    const server = await listen("127.0.0.1");
    const fetch = client({ allowPrivate: true, minIntervalMs: 100 });
    const url = `http://127.0.0.1:${server.port}/`;
    await (await fetch(`${url}a`)).text();
    // B waits for its turn; a long synchronous task (a big JSON parse, a GC pause) makes its timer
    // fire ~150 ms late. C must still wait a full interval after B actually went out.
    const b = fetch(`${url}b`);
    setTimeout(() => {
      const until = performance.now() + 150;
      while (performance.now() < until) {
        // stalled
      }
    }, 10);
    await (await b).text();
    await (await fetch(`${url}c`)).text();
    expect(server.requests.map((r) => r.url)).toEqual(["/a", "/b", "/c"]);
    const [, bToC] = gaps(server.requests);
    expect(bToC).toBeGreaterThanOrEqual(90);
  });
});

describe("proxy environment variables are ignored", () => {
  it("a request reaches the real server and the proxy sees nothing", async () => {
    const proxy = await listen("127.0.0.1", (_req, res) => {
      res.end("from the proxy");
    });
    const server = await listen("127.0.0.1");
    const proxyUrl = `http://127.0.0.1:${proxy.port}`;
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) vi.stubEnv(name, proxyUrl);
    for (const name of ["NO_PROXY", "no_proxy"]) vi.stubEnv(name, "");
    const url = `http://127.0.0.1:${server.port}/`;

    // Control: an env-reading dispatcher does go through this proxy in this environment
    // (forwarding rather than tunnelling, so the stand-in proxy can answer it itself).
    const envAgent = new EnvHttpProxyAgent({ proxyTunnel: false });
    try {
      expect(await (await undiciFetch(url, { dispatcher: envAgent })).text()).toBe("from the proxy");
    } finally {
      await envAgent.destroy();
    }
    expect(proxy.requests).toHaveLength(1);

    const res = await client({ allowPrivate: true })(url);
    expect(await res.text()).toBe("ok");
    expect(server.requests).toHaveLength(1);
    expect(proxy.requests).toHaveLength(1);
    expect(proxy.connections).toBe(1);
  });
});

describe("credentials never appear in refusals", () => {
  const SECRET = "Bearer s3cr3t-xyz-4c1d2e";
  const KEY = "k3y-abc-9f8e7d";
  const headers = { authorization: SECRET, "x-api-key": KEY };

  function assertClean(err: Error) {
    for (const e of chain(err)) {
      for (const text of [e.message, e.stack ?? "", String(e), JSON.stringify(e)]) {
        expect(text).not.toContain("s3cr3t");
        expect(text).not.toContain(KEY);
      }
    }
  }

  it("a refused dial", async () => {
    const fetch = client({
      lookup: fakeLookup({ "api.example.test": "10.0.0.1" }),
      credentialHeaders: ["X-Api-Key"],
    });
    const err = await failure(
      fetch("http://api.example.test:8080/mcp", { method: "POST", headers, body: "{}" }),
    );
    expect(messages(err)).toContain(
      "refused: api.example.test resolves to 10.0.0.1, a private (RFC 1918) address; set allowPrivate to allow",
    );
    assertClean(err);
  });

  it("a redirect refused at its next dial", async (ctx) => {
    if (!HAS_127_0_0_2) ctx.skip(NO_127_0_0_2);
    const privateServer = await listen("127.0.0.1");
    const start = await listen(
      "127.0.0.2",
      redirecting(() => `http://private.test:${privateServer.port}/`, 307),
    );
    const fetch = client({ lookup: DNS, refuse: PUBLIC_127_0_0_2, credentialHeaders: ["X-Api-Key"] });
    const err = await failure(
      fetch(`http://public-a.test:${start.port}/`, { method: "POST", headers, body: "{}" }),
    );
    expect(messages(err)).toContain(
      "refused: private.test resolves to 127.0.0.1, a loopback address; set allowPrivate to allow",
    );
    expect(start.requests[0]?.headers.authorization).toBe(SECRET);
    expect(privateServer.requests).toHaveLength(0);
    assertClean(err);
  });
});
