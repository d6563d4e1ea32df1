// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { authSecrets, ConfigError, formatIssues } from "./index";
import { MAX_CLIENT_ID_CHARS, MAX_SCOPE_CHARS, MAX_SCOPES } from "./server-auth";
import { check, http, messagesAt, onlyServer, stdio, withServers } from "./test-helpers";

const at = (name: string, rest = "") => `mcpServers.${name}.auth${rest}`;
const SECRET = "cs-Zq81x-7f3e9a2b-client-secret";
const ISSUER = "https://auth.example.com";

describe("a server's auth: accepted forms", () => {
  it('is absent unless written; {"type": "oauth"} alone gives no scopes and no client', () => {
    expect(onlyServer(withServers({ a: http })).auth).toBeUndefined();
    expect(onlyServer(withServers({ a: { ...http, auth: { type: "oauth" } } })).auth).toEqual({
      type: "oauth",
      scopes: [],
      clientId: null,
      clientSecret: null,
      issuer: null,
      allowPrivate: false,
    });
  });

  it("scopes keep the file's order; clientId and a ${VAR} clientSecret are expanded", () => {
    const result = check(
      {
        mcpServers: {
          a: {
            ...http,
            enabled: true,
            auth: {
              type: "oauth",
              scopes: [
                "write",
                "read",
                "https://www.example.com/auth/drive.readonly",
                "a!#$%&'()*+,-./:;<=>?@[]^_`{|}~",
              ],
              clientId: "${TASKS_CLIENT_ID}",
              issuer: ISSUER,
              clientSecret: "${TASKS_CLIENT_SECRET}",
            },
          },
        },
      },
      { TASKS_CLIENT_ID: "gatehouse-prod", TASKS_CLIENT_SECRET: SECRET },
    );
    expect(onlyServer(result).auth).toEqual({
      type: "oauth",
      scopes: [
        "write",
        "read",
        "https://www.example.com/auth/drive.readonly",
        "a!#$%&'()*+,-./:;<=>?@[]^_`{|}~",
      ],
      clientId: "gatehouse-prod",
      clientSecret: SECRET,
      issuer: ISSUER,
      allowPrivate: false,
    });
  });

  it("a legacy SSE server may have auth too, and other headers are kept beside it", () => {
    const server = onlyServer(
      withServers({
        a: {
          ...http,
          type: "sse",
          headers: { "X-Tenant": "t1" },
          auth: { type: "oauth", clientId: "c1", issuer: ISSUER },
        },
      }),
    );
    expect(server.transport).toBe("sse");
    expect(server.headers).toEqual({ "X-Tenant": "t1" });
    expect(server.auth).toEqual({
      type: "oauth",
      scopes: [],
      clientId: "c1",
      clientSecret: null,
      issuer: ISSUER,
      allowPrivate: false,
    });
  });

  it("authSecrets lists each configured client secret, for the log's redaction", () => {
    const result = check(
      {
        mcpServers: {
          a: {
            ...http,
            auth: { type: "oauth", clientId: "c1", issuer: ISSUER, clientSecret: "${A_SECRET}" },
          },
          b: { ...http, auth: { type: "oauth", clientId: "c2", issuer: ISSUER } },
          c: http,
        },
      },
      { A_SECRET: SECRET },
    );
    expect(result.errors).toEqual([]);
    expect(authSecrets(result.config?.servers ?? [])).toEqual([SECRET]);
  });
});

describe("a server's auth: refusals", () => {
  it("auth on a stdio server is refused at its path", () => {
    const result = withServers({ files: { ...stdio, auth: { type: "oauth" } } });
    expect(result.config).toBeNull();
    expect(result.errors).toEqual([
      {
        path: "mcpServers.files.auth",
        message:
          'is only for HTTP servers (with "url"); a stdio server signs in by itself, or takes its credentials through "env"',
      },
    ]);
  });

  it("auth that is not an object is refused with its shape", () => {
    const result = withServers({ a: { ...http, auth: "oauth" } });
    expect(messagesAt(result.errors, at("a"))).toEqual([
      'must be an object like {"type": "oauth", "scopes": ["read", "write"]}, not a string',
    ]);
  });

  it("an unknown auth type, or none, is refused with the fix", () => {
    const result = withServers({
      a: { ...http, auth: { type: "bearer" } },
      b: { ...http, auth: { type: 2 } },
      c: { ...http, auth: { scopes: ["read"] } },
    });
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, at("a", ".type"))).toEqual([
      '"bearer" is not an auth type; use "oauth" (a static token goes in "headers" instead, e.g. "Authorization": "Bearer ${TOKEN}")',
    ]);
    expect(messagesAt(result.errors, at("b", ".type"))[0]).toMatch(
      /^a number is not an auth type; use "oauth"/,
    );
    expect(messagesAt(result.errors, at("c", ".type"))).toEqual(['is required; write "type": "oauth"']);
  });

  it("unknown keys in auth are refused, with a fix for other clients' names", () => {
    const result = withServers({
      a: {
        ...http,
        auth: {
          type: "oauth",
          scope: "read",
          client_id: "x",
          callbackPort: 8080,
          tokenUrl: "https://x",
          scoeps: [],
        },
      },
    });
    expect(messagesAt(result.errors, at("a", ".scope"))).toEqual([
      'unknown key "scope"; use "scopes", an array of scope names, e.g. ["read", "write"]',
    ]);
    expect(messagesAt(result.errors, at("a", ".client_id"))).toEqual([
      'unknown key "client_id"; use "clientId" instead',
    ]);
    expect(messagesAt(result.errors, at("a", ".callbackPort"))[0]).toMatch(/returns to \/oauth\/callback/);
    expect(messagesAt(result.errors, at("a", ".tokenUrl"))[0]).toMatch(
      /discovers it from the server's metadata/,
    );
    expect(messagesAt(result.errors, at("a", ".scoeps"))).toEqual([
      'unknown key "scoeps"; did you mean "scopes"?',
    ]);
  });

  it("scopes that are not non-empty RFC 6749 scope tokens are refused at their index", () => {
    const result = withServers({
      a: {
        ...http,
        auth: {
          type: "oauth",
          scopes: ["read", "read write", "", 7, 'say"hi', "back\\slash", "café", " read"],
        },
      },
    });
    expect(result.config).toBeNull();
    const scope = (i: number) => messagesAt(result.errors, at("a", `.scopes[${i}]`));
    expect(scope(0)).toEqual([]);
    expect(scope(1)).toEqual([
      '"read write" holds whitespace, and a scope is one word (RFC 6749); list each on its own: "read", "write"',
    ]);
    expect(scope(2)).toEqual(['must be a non-empty scope name like "read", not an empty string']);
    expect(scope(3)).toEqual(['must be a non-empty scope name like "read", not a number']);
    for (const i of [4, 5, 6]) {
      expect(scope(i), String(i)).toEqual([
        expect.stringMatching(
          /holds a character no scope may hold; RFC 6749 allows printable ASCII except space/,
        ),
      ]);
    }
    expect(scope(7)).toEqual([expect.stringMatching(/^" read" holds whitespace.*; remove the whitespace$/)]);
  });

  it("a scope listed twice is refused at the repeat", () => {
    const result = withServers({
      a: { ...http, auth: { type: "oauth", scopes: ["read", "write", "read"] } },
    });
    expect(result.errors).toEqual([
      { path: at("a", ".scopes[2]"), message: '"read" is listed twice; remove one' },
    ]);
  });

  it("scopes must be a non-empty array within bounds", () => {
    const result = withServers({
      a: { ...http, auth: { type: "oauth", scopes: "read write" } },
      b: { ...http, auth: { type: "oauth", scopes: [] } },
      c: {
        ...http,
        auth: { type: "oauth", scopes: Array.from({ length: MAX_SCOPES + 1 }, (_, i) => `s${i}`) },
      },
      d: { ...http, auth: { type: "oauth", scopes: ["x".repeat(MAX_SCOPE_CHARS + 1)] } },
    });
    expect(messagesAt(result.errors, at("a", ".scopes"))).toEqual([
      'must be an array of scope names like ["read", "write"], not a string; write ["read", "write"]',
    ]);
    expect(messagesAt(result.errors, at("b", ".scopes"))).toEqual([
      'lists no scope; name at least one, or leave "scopes" out to ask for what the server says it needs',
    ]);
    expect(messagesAt(result.errors, at("c", ".scopes"))).toEqual([
      `lists ${MAX_SCOPES + 1} scopes; at most ${MAX_SCOPES} are allowed`,
    ]);
    expect(messagesAt(result.errors, at("d", ".scopes[0]"))).toEqual([
      `is ${MAX_SCOPE_CHARS + 1} characters long; at most ${MAX_SCOPE_CHARS} are allowed`,
    ]);
    const fits = withServers({
      a: { ...http, auth: { type: "oauth", scopes: Array.from({ length: MAX_SCOPES }, (_, i) => `s${i}`) } },
      b: { ...http, auth: { type: "oauth", scopes: ["x".repeat(MAX_SCOPE_CHARS)] } },
    });
    expect(fits.errors).toEqual([]);
  });

  it("a clientId that is empty, too long or not printable ASCII is refused", () => {
    const result = check(
      {
        mcpServers: {
          a: { ...http, auth: { type: "oauth", clientId: "", issuer: ISSUER } },
          b: { ...http, auth: { type: "oauth", clientId: 42, issuer: ISSUER } },
          c: {
            ...http,
            auth: { type: "oauth", clientId: "x".repeat(MAX_CLIENT_ID_CHARS + 1), issuer: ISSUER },
          },
          d: { ...http, auth: { type: "oauth", clientId: "client\u00e9", issuer: ISSUER } },
          e: { ...http, auth: { type: "oauth", clientId: "client ", issuer: ISSUER } },
          f: { ...http, auth: { type: "oauth", clientId: "${LONG_ID}", issuer: ISSUER } },
        },
      },
      { LONG_ID: "y".repeat(MAX_CLIENT_ID_CHARS + 1) },
    );
    const id = (name: string) => messagesAt(result.errors, at(name, ".clientId"));
    expect(id("a")).toEqual([
      "must be a non-empty string, the client ID the authorization server issued, not an empty string",
    ]);
    expect(id("b")[0]).toMatch(/not a number$/);
    expect(id("c")).toEqual([
      `is ${MAX_CLIENT_ID_CHARS + 1} characters long; at most ${MAX_CLIENT_ID_CHARS} are allowed`,
    ]);
    for (const name of ["d", "e"]) {
      expect(id(name), name).toEqual([
        "holds a character a client ID cannot; RFC 6749 allows printable ASCII, and no space at either end",
      ]);
    }
    expect(id("f")).toEqual([
      `is ${MAX_CLIENT_ID_CHARS + 1} characters long (after \${VAR} expansion); at most ${MAX_CLIENT_ID_CHARS} are allowed`,
    ]);
    expect(
      withServers({
        a: { ...http, auth: { type: "oauth", clientId: "x".repeat(MAX_CLIENT_ID_CHARS), issuer: ISSUER } },
      }).errors,
    ).toEqual([]);
  });

  it("a clientSecret without a clientId is refused", () => {
    const result = check(
      { mcpServers: { a: { ...http, auth: { type: "oauth", clientSecret: "${A_SECRET}" } } } },
      { A_SECRET: SECRET },
    );
    expect(result.errors).toEqual([
      {
        path: at("a", ".clientSecret"),
        message:
          'needs "clientId": a client secret belongs to a client registered in advance; add its "clientId", or remove "clientSecret"',
      },
    ]);
  });

  it("a clientSecret written in the file, or as a ${VAR:-default}, is refused with why, and never echoed", () => {
    const written = [SECRET, `\${A_SECRET:-${SECRET}}`, `x\${A_SECRET}`, "${A_SECRET}${B}", "${A_SECRET"];
    for (const clientSecret of written) {
      const result = check(
        {
          mcpServers: {
            a: { ...http, auth: { type: "oauth", clientId: "c1", issuer: ISSUER, clientSecret } },
          },
        },
        { A_SECRET: SECRET, B: "b" },
      );
      expect(result.config, clientSecret).toBeNull();
      expect(result.errors, clientSecret).toEqual([
        {
          path: at("a", ".clientSecret"),
          message:
            'must be one ${VAR} reference and nothing else, e.g. "${TASKS_CLIENT_SECRET}": a secret written here (or as a ${VAR:-default}) would sit in gatehouse.json for anyone who can read the file or its backups; set it in Gatehouse\'s environment',
        },
      ]);
      expect(new ConfigError(result.errors).message).not.toContain(SECRET);
    }
    const notString = withServers({
      a: { ...http, auth: { type: "oauth", clientId: "c1", issuer: ISSUER, clientSecret: 123456 } },
    });
    expect(messagesAt(notString.errors, at("a", ".clientSecret"))).toEqual([
      'must be a ${VAR} reference to the secret, e.g. "${TASKS_CLIENT_SECRET}", not a number',
    ]);
    expect(formatIssues(notString)).not.toContain("123456");
  });

  it("an unset clientSecret reference is an error on an enabled server and a warning on a dark one", () => {
    const auth = { type: "oauth", clientId: "c1", issuer: ISSUER, clientSecret: "${NOPE_SECRET}" };
    const enabled = withServers({ a: { ...http, enabled: true, auth } });
    expect(messagesAt(enabled.errors, at("a", ".clientSecret"))).toEqual([
      'uses ${NOPE_SECRET}, which is not set; set NOPE_SECRET in Gatehouse\'s environment, or set "enabled": false',
    ]);
    const dark = withServers({ a: { ...http, auth } });
    expect(dark.errors).toEqual([]);
    expect(messagesAt(dark.warnings, at("a", ".clientSecret"))).toEqual([
      expect.stringMatching(/cannot be enabled until it is set$/),
    ]);
    // The reference as written is no secret: nothing to send, nothing to redact.
    const servers = dark.config?.servers ?? [];
    expect(servers[0]?.auth?.clientSecret).toBeNull();
    expect(authSecrets(servers)).toEqual([]);
  });

  it("an empty or multi-line clientSecret from the environment is refused without showing it", () => {
    const auth = { type: "oauth", clientId: "c1", issuer: ISSUER, clientSecret: "${A_SECRET}" };
    const empty = check({ mcpServers: { a: { ...http, auth } } }, { A_SECRET: "" });
    expect(messagesAt(empty.errors, at("a", ".clientSecret"))).toEqual([
      "is empty once ${A_SECRET} is expanded; set A_SECRET to the client secret",
    ]);
    const broken = check({ mcpServers: { a: { ...http, auth } } }, { A_SECRET: `${SECRET}\r\nX-Evil: 1` });
    expect(messagesAt(broken.errors, at("a", ".clientSecret"))).toEqual([
      "contains a line break or NUL character once ${A_SECRET} is expanded; set A_SECRET to the secret alone",
    ]);
    expect(formatIssues(broken)).not.toContain(SECRET);
  });

  it("an Authorization header beside auth is refused at the header, whatever its case", () => {
    const result = check(
      {
        mcpServers: {
          a: {
            ...http,
            headers: { authorization: "Bearer ${TOKEN}", "X-Tenant": "t1" },
            auth: { type: "oauth" },
          },
          b: { ...http, headers: { Authorization: "Bearer ${TOKEN}" } },
        },
      },
      { TOKEN: SECRET },
    );
    expect(result.errors).toEqual([
      {
        path: "mcpServers.a.headers.authorization",
        message:
          'cannot be sent beside "auth": the OAuth access token goes in the Authorization header; remove this header, or remove "auth" to keep sending it',
      },
    ]);
    expect(formatIssues(result)).not.toContain(SECRET);
  });
});

describe("a server's auth: the issuer of a client registered in advance, and auth.allowPrivate", () => {
  it("a clientId without an issuer is refused at auth.issuer: a pre-registered client belongs to one authorization server", () => {
    const result = withServers({ x: { ...http, auth: { type: "oauth", clientId: "c1" } } });
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "mcpServers.x.auth.issuer")).toEqual([
      'required with clientId: a client registered in advance belongs to one authorization server, and its secret goes to no other; write that server\'s issuer URL, e.g. "issuer": "https://auth.example.com"',
    ]);
  });

  it("an issuer is an http(s) URL without query or fragment, kept as written; allowPrivate is a boolean, false unless written", () => {
    const server = onlyServer(
      withServers({
        a: {
          ...http,
          auth: {
            type: "oauth",
            clientId: "c1",
            issuer: "https://auth.example.com/tenant",
            allowPrivate: true,
          },
        },
      }),
    );
    expect(server.auth).toEqual({
      type: "oauth",
      scopes: [],
      clientId: "c1",
      clientSecret: null,
      issuer: "https://auth.example.com/tenant",
      allowPrivate: true,
    });
    const result = withServers({
      a: { ...http, auth: { type: "oauth", clientId: "c1", issuer: "ftp://auth.example.com" } },
      b: { ...http, auth: { type: "oauth", clientId: "c1", issuer: "https://auth.example.com/?x=1" } },
      c: { ...http, auth: { type: "oauth", clientId: "c1", issuer: 42 } },
      d: { ...http, auth: { type: "oauth", allowPrivate: "yes" } },
    });
    expect(messagesAt(result.errors, at("a", ".issuer"))[0]).toMatch(/^must be an https URL/);
    expect(messagesAt(result.errors, at("b", ".issuer"))[0]).toMatch(/no query or fragment/);
    expect(messagesAt(result.errors, at("c", ".issuer"))[0]).toMatch(/^must be an https URL.*not a number$/);
    expect(messagesAt(result.errors, at("d", ".allowPrivate"))).toEqual([
      "must be true or false, not a string",
    ]);
  });
});
