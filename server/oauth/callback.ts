import "server-only";
import { AuthorizationServerMismatchError, auth, IssuerMismatchError } from "@modelcontextprotocol/client";
import type { SignInOutcome } from "@/lib/api-types";
import { writeAudit } from "../store/audit";
import { emptyFlow, type FlowState } from "./provider";
import type { SignInState } from "./sign-in-state";
import { type Grant, sha256Hex } from "./store";
import { expiryOf, isRefusedAddress, shortWhy } from "./text";

/**
 * The end of a sign-in: the authorization server sent the browser back. The started sign-in is
 * taken (one use), checked (not aged, bound to the browser that started it, `iss` by RFC 9207),
 * its code exchanged, and the grant stored sealed; every refusal is audited and stores nothing.
 */

/** What ended a sign-in at the callback; `server` null when the callback names none Gatehouse knows. */
export interface SignInResult {
  server: string | null;
  outcome: SignInOutcome;
}

/**
 * `params` is the callback's query, `bindings` the ones the sign-in cookie holds (one per sign-in
 * this browser started lately). The started sign-in is
 * used up whatever the outcome; a grant is stored only when the code was exchanged with the
 * authorization server that was asked.
 */
export async function finishSignIn(
  s: SignInState,
  params: URLSearchParams,
  bindings: readonly string[],
): Promise<SignInResult> {
  const state = params.get("state");
  const pending = state ? await s.store.takePending(sha256Hex(state)) : null;
  if (!pending) {
    s.deps.log.warn(
      "a sign-in came back with a state Gatehouse does not hold (used already, cleaned up after 10 minutes, or never issued here); nothing was stored",
    );
    return { server: null, outcome: "expired" };
  }
  const server = pending.server;
  const c = s.find(server);
  const refuse = async (outcome: SignInOutcome, why: string): Promise<SignInResult> => {
    await writeAudit(s.deps.db, {
      actor: pending.startedBy,
      action: "server.oauth.refused",
      subject: server,
      detail: JSON.stringify({ outcome, why }),
    });
    s.deps.log.warn(`server ${server}: a sign-in was refused: ${why}`);
    return { server: c ? server : null, outcome };
  };
  if (!c) return refuse("failed", "the server is no longer configured");
  if (Date.parse(pending.expiresAt) <= s.now())
    return refuse("expired", "the sign-in took longer than 10 minutes");
  if (!bindings.some((b) => sha256Hex(b) === pending.bindingHash)) {
    return refuse("wrong_user", "the sign-in came back to a browser that did not start it");
  }
  const error = params.get("error");
  if (error !== null) {
    const code = /^[a-z_]{1,64}$/.test(error) ? error : "an unreadable error";
    return refuse(
      error === "access_denied" ? "denied" : "failed",
      `the authorization server answered ${code}`,
    );
  }
  const code = params.get("code");
  if (!code) return refuse("failed", "the authorization server sent no code");
  const secrets = pending.secrets;
  const flow: FlowState = {
    ...emptyFlow(state ?? ""),
    codeVerifier: secrets.codeVerifier,
    discovery: secrets.discovery,
    client: secrets.client,
  };
  const provider = s.provider(c, flow, secrets.redirectUri, secrets.scope);
  try {
    await auth(provider, {
      serverUrl: secrets.resource,
      authorizationCode: code,
      ...(params.has("iss") ? { iss: params.get("iss") ?? "" } : {}),
      ...(secrets.scope ? { scope: secrets.scope } : {}),
      fetchFn: s.fetchFor(c),
    });
  } catch (err) {
    if (err instanceof IssuerMismatchError || err instanceof AuthorizationServerMismatchError) {
      return refuse(
        "issuer_mismatch",
        "the authorization response came from another issuer than the one asked (RFC 9207)",
      );
    }
    const why = shortWhy(err);
    if (isRefusedAddress(err)) return refuse("refused_address", why);
    return refuse("failed", `exchanging the code failed: ${why}`);
  }
  const tokens = flow.tokens;
  if (!tokens) return refuse("failed", "the authorization server gave no tokens");
  const now = s.now();
  const issuer = tokens.issuer ?? flow.discovery?.authorizationServerMetadata?.issuer ?? null;
  const grant: Grant = {
    server,
    resource: secrets.resource,
    secrets: {
      ...(flow.client ? { client: flow.client } : {}),
      tokens,
      ...(flow.discovery ? { discovery: flow.discovery } : {}),
      ...(flow.resource ? { resource: flow.resource } : {}),
    },
    issuer,
    scope: tokens.scope ?? secrets.scope,
    accessExpiresAt: expiryOf(tokens.expires_in, now),
    connectedBy: pending.startedBy,
    connectedAt: new Date(now).toISOString(),
    refreshedAt: null,
    problem: null,
  };
  await s.changing(() =>
    s.save(grant, {
      actor: pending.startedBy,
      action: "server.oauth.connected",
      subject: server,
      detail: JSON.stringify({ issuer, scope: grant.scope }),
    }),
  );
  s.stepUps.delete(server);
  s.notes.delete(server);
  s.deps.log.info(
    `server ${server}: signed in at ${issuer ?? "its authorization server"} by ${pending.startedBy}`,
  );
  s.deps.onGrantChanged(server);
  return { server, outcome: "connected" };
}
