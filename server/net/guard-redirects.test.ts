/**
 * Redirects through the outbound HTTP guard (PRODUCT.md §4): none for allowPrivate servers, each
 * hop dialled through the same address check, credentials dropped across origins, a bounded
 * chain, no downgrade from https, and the method and body a POST keeps on each status. The
 * servers, the simulated DNS and the loopback-only safety net are in guard-fixtures.ts.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  client,
  DNS,
  failure,
  HAS_127_0_0_2,
  IPV6,
  listen,
  messages,
  NO_127_0_0_2,
  NO_IPV6,
  PUBLIC_127_0_0_2,
  redirecting,
  registerGuardHooks,
} from "./guard-fixtures";
import { MAX_REDIRECTS, RedirectRefusedError } from "./guarded-fetch";

registerGuardHooks();

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
