import "server-only";
import { type CallToolResult, Client, type Progress, type Root } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import { MAX_TOOL_PAGES } from "./supervision";

/**
 * How long a stdio server gets to answer the `server/discover` probe before it is taken for a
 * 2025 server that ignores requests sent before `initialize` (the SDK's stdio rule: silence on
 * stdio means legacy). Short, because such a server would otherwise hold every dial this long;
 * over HTTP silence is an outage and the probe fails with the server's `timeoutMs` as any request.
 */
export const STDIO_PROBE_TIMEOUT_MS = 3000;

export interface ClientSetup {
  /** Each `notifications/tools/list_changed`, of either era (must not throw). */
  onToolsChanged(): void;
  /** The server's configured roots (default none). */
  roots?: readonly Root[];
  /** Whether the transport is a stdio child (decides what a silent probe means). */
  stdio: boolean;
  /**
   * How long a stdio server gets to answer the probe; default {@link STDIO_PROBE_TIMEOUT_MS}.
   * (Over HTTP the probe has the server's `timeoutMs`, as any request.)
   */
  stdioProbeTimeoutMs?: number;
}

/**
 * The SDK client Gatehouse dials a tool server with. It negotiates the era itself
 * (`versionNegotiation: auto`): `server/discover` first, and a server that does not answer it as a
 * 2026-07-28 server gets the plain 2025 `initialize` on the same connection.
 *
 * Roots: `roots/list` answers `roots` and nothing else, on either era (a 2026 server asks through
 * an `input_required` result, which the SDK fulfils through the same handler); each answer is a
 * fresh copy, so nothing a server does with one reaches the next. `listChanged: true` is kept
 * without ever sending `notifications/roots/list_changed`: the roots come from the config, which
 * changes only with a restart, and a new connection asks afresh. Sampling and elicitation are not
 * declared, so the SDK refuses them.
 */
export function newClient(setup: ClientSetup): Client {
  // Copied now: only the uri and name of each root, whatever else the objects passed in hold.
  const listed = (setup.roots ?? []).map(({ uri, name }) => (name === undefined ? { uri } : { uri, name }));
  const client = new Client(
    { name: "gatehouse", version: "0.1.0" },
    {
      capabilities: { roots: { listChanged: true } },
      versionNegotiation: {
        mode: "auto",
        ...(setup.stdio ? { probe: { timeoutMs: setup.stdioProbeTimeoutMs ?? STDIO_PROBE_TIMEOUT_MS } } : {}),
      },
      listMaxPages: MAX_TOOL_PAGES,
      // A 2026-07-28 server asks for input (roots, the only kind Gatehouse gives) by answering a
      // call with `input_required`; the SDK then sends the call again with the answers. One such
      // round is all roots need: each round is the call sent once more.
      inputRequired: { maxRounds: 1 },
    },
  );
  client.setRequestHandler("roots/list", async () => ({
    roots: listed.map((root) => ({ ...root })),
  }));
  client.setNotificationHandler("notifications/tools/list_changed", async () => setup.onToolsChanged());
  const routes = new Map<string, (progress: Progress) => void>();
  progressRoutes.set(client, routes);
  // Routed here, not by the SDK's `onprogress`: the SDK retires a request's progress handler as
  // its response arrives, while a notification read just before it is dispatched a microtask
  // later, so the last progress before the answer is lost and reported as an error (SDK issue
  // modelcontextprotocol/typescript-sdk#2580). A token no call holds any more is ignored.
  client.setNotificationHandler("notifications/progress", ({ params: { progressToken, ...progress } }) => {
    routes.get(String(progressToken))?.(progress);
  });
  return client;
}

const progressRoutes = new WeakMap<Client, Map<string, (progress: Progress) => void>>();
let lastToken = 0;

/**
 * A progress token for one request on `client` (a client made by {@link newClient}) whose
 * notifications go to `onProgress` until `done()`; call `done()` once the caller has the answer.
 */
export function progressRoute(
  client: Client,
  onProgress: (progress: Progress) => void,
): { token: string; done(): void } {
  const routes = progressRoutes.get(client);
  const token = `gatehouse-${++lastToken}`;
  routes?.set(token, onProgress);
  return { token, done: () => routes?.delete(token) };
}

/**
 * `result`, unless it holds no answer: a result with no content and no structured content is no
 * answer, not an empty success (`upstream_error`). (The SDK fills in `content: []` when a result
 * has none.)
 */
export function answerOf(server: string, result: CallToolResult): CallToolResult {
  const content = Array.isArray(result.content) ? result.content : [];
  if (content.length === 0 && result.structuredContent === undefined) {
    throw new GatehouseError("upstream_error", `server ${server}: the server returned an empty result`);
  }
  return result;
}
