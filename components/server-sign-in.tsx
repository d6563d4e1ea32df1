"use client";

import { useMutation } from "@tanstack/react-query";
import { usePathname, useRouter, useSearchParams } from "next/navigation";
import { useEffect, useState } from "react";
import { Age } from "@/components/age";
import { Button, cx, ErrorAlert } from "@/components/ui";
import { type ServerAuthView, type ServerView, type SignInOutcome, signInOutcomes } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatAge, formatDateTime, formatUntil } from "@/lib/format";

type Revocation = "revoked" | "refresh_only" | "not_offered" | "failed";

/** How long the note after a Disconnect stays when there is nothing left to do about it. */
const REVOCATION_NOTE_MS = 10_000;

/** What a Disconnect did; `until`, the access token's expiry when it was not revoked. */
function revocationText(revocation: Revocation, until: string | null): string {
  if (revocation !== "refresh_only") return revocationTexts[revocation];
  return `Disconnected. The refresh token was revoked; the authorization server cannot revoke the access token, which stays valid there until ${until ? formatDateTime(until) : "it expires"}.`;
}

const revocationTexts: Record<Exclude<Revocation, "refresh_only">, string> = {
  revoked: "Disconnected. The authorization server revoked the tokens.",
  not_offered:
    "Disconnected. The server offers no revocation, so the tokens were only forgotten here; they stay valid at the authorization server until they expire.",
  failed:
    "Disconnected, but revocation failed: the tokens were forgotten here and may stay valid at the authorization server until they expire.",
};

const revocationTones: Record<Revocation, string> = {
  revoked: "border-emerald-200 bg-emerald-50 text-emerald-900",
  refresh_only: "border-amber-200 bg-amber-50 text-amber-900",
  not_offered: "border-zinc-200 bg-white text-zinc-800",
  failed: "border-amber-200 bg-amber-50 text-amber-900",
};

/**
 * The address to send the browser to for a sign-in. The address is built from the authorization
 * server's metadata, which a hostile server writes; anything other than http(s) (a `javascript:`
 * URL above all) is refused rather than handed to `location.assign`.
 */
function signInAddress(authorizationUrl: string): string {
  let url: URL;
  try {
    url = new URL(authorizationUrl);
  } catch {
    throw new Error("The sign-in address Gatehouse got back is not a URL, so it was not opened.");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new Error(`The sign-in address uses ${url.protocol}, not http(s), so it was not opened.`);
  return url.href;
}

/**
 * True when the card's sign-in block shows `server.lastError` (as the reason for waiting, or
 * beside it), so the card need not show it again as a red error: a server waiting for a sign-in
 * is not broken.
 */
export function signInShowsLastError(server: ServerView): boolean {
  return server.state === "needs_auth" && server.auth !== null;
}

/**
 * The OAuth part of a server card: whether and by whom it is signed in, the grant's scopes, the
 * access token's expiry (never the token), the client Gatehouse signs in as, and Connect /
 * Disconnect. Renders nothing for a server without OAuth (`auth: null`).
 *
 * `onUpdated` receives the server as the API returns it after a Disconnect, to put in the cache.
 * Connect sends the browser to the authorization server; the way back is `/oauth/callback`, which
 * lands on `/servers` with the outcome that {@link SignInBanner} shows.
 */
export function ServerSignIn({
  server,
  now,
  onUpdated,
}: {
  server: ServerView;
  /** The card's clock (ms), for the access token's expiry. */
  now: number;
  onUpdated: (server: ServerView) => void;
}) {
  return server.auth ? (
    <SignInBlock server={server} auth={server.auth} now={now} onUpdated={onUpdated} />
  ) : null;
}

function SignInBlock({
  server,
  auth,
  now,
  onUpdated,
}: {
  server: ServerView;
  auth: ServerAuthView;
  now: number;
  onUpdated: (server: ServerView) => void;
}) {
  const waiting = server.state === "needs_auth";
  const [confirming, setConfirming] = useState(false);
  const [revocation, setRevocation] = useState<Revocation | null>(null);
  const [validUntil, setValidUntil] = useState<string | null>(null);

  const connect = useMutation({
    mutationFn: async () => signInAddress((await endpoints.servers.connect(server.name)).authorizationUrl),
    onMutate: () => setRevocation(null),
    onSuccess: (address) => window.location.assign(address),
  });
  const disconnect = useMutation({
    mutationFn: () => endpoints.servers.disconnect(server.name),
    onSuccess: ({ server: updated, revocation: outcome, accessExpiresAt }) => {
      setConfirming(false);
      setRevocation(outcome);
      setValidUntil(accessExpiresAt ?? null);
      onUpdated(updated);
    },
  });

  // The button stays "Opening sign-in…" until the browser has left; coming back with Back from
  // the authorization server restores this page from the back/forward cache, where it must be
  // pressable again.
  const resetConnect = connect.reset;
  useEffect(() => {
    const onShow = (event: PageTransitionEvent) => {
      if (event.persisted) resetConnect();
    };
    window.addEventListener("pageshow", onShow);
    return () => window.removeEventListener("pageshow", onShow);
  }, [resetConnect]);

  // A failed or partial revocation stays until dismissed: the owner may want to revoke the
  // access at the authorization server themselves.
  useEffect(() => {
    if (revocation === null || revocation === "failed" || revocation === "refresh_only") return;
    const timer = setTimeout(() => setRevocation(null), REVOCATION_NOTE_MS);
    return () => clearTimeout(timer);
  }, [revocation]);

  const opening = connect.isPending || connect.isSuccess;
  const reason = auth.reason ?? server.lastError;

  return (
    <section
      aria-label={`Sign-in of ${server.name}`}
      data-testid={`sign-in-${server.name}`}
      className={cx(
        "flex min-w-0 flex-col gap-2 rounded-md border px-3 py-2 text-sm",
        waiting ? "border-violet-200 bg-violet-50" : "border-zinc-200 bg-zinc-50",
      )}
    >
      {waiting ? (
        <div>
          <p className="font-medium text-violet-900">Waiting for sign-in</p>
          <p className="mt-0.5 whitespace-pre-wrap break-words text-violet-900">
            {reason ? asSentence(reason) : "This server asks for an OAuth sign-in, and none is stored."}
          </p>
          {auth.reason !== null && server.lastError !== null && server.lastError !== auth.reason ? (
            <p className="mt-0.5 whitespace-pre-wrap break-words text-violet-800">
              Last answer: {server.lastError}
            </p>
          ) : null}
          <p className="mt-1 text-violet-800">
            While it waits, nothing is sent to this server and agents' calls to its tools are refused.
          </p>
        </div>
      ) : null}

      {auth.connected ? (
        <p className="break-words text-zinc-800">
          {waiting ? "Last signed in" : "Signed in"}
          {auth.issuer ? (
            <>
              {" "}
              at <span className="break-all font-mono">{auth.issuer}</span>
            </>
          ) : null}
          {auth.connectedBy ? (
            <>
              {" "}
              by <span className="font-medium">{auth.connectedBy}</span>
            </>
          ) : null}
          {auth.connectedAt ? (
            <>
              , <Age at={auth.connectedAt} />
            </>
          ) : null}
        </p>
      ) : waiting ? null : (
        <p className="font-medium text-zinc-800">Not signed in</p>
      )}

      <dl className="grid grid-cols-[auto_minmax(0,1fr)] gap-x-4 gap-y-1">
        <dt className="text-zinc-500">Sign-in</dt>
        <dd className="break-words">
          {auth.source === "config"
            ? "OAuth, asked for by gatehouse.json"
            : "OAuth, asked for by the server itself (it answered 401 naming its authorization metadata)"}
        </dd>
        <dt className="text-zinc-500">{auth.connected ? "Scopes granted" : "Scopes asked"}</dt>
        <dd className="min-w-0">
          <ScopeList scopes={auth.scopes} connected={auth.connected} />
        </dd>
        {auth.connected ? (
          <>
            <dt className="text-zinc-500">Access token</dt>
            <dd className="break-words">{tokenExpiry(auth.expiresAt, now, !waiting)}</dd>
          </>
        ) : null}
        {auth.client ? (
          <>
            <dt className="text-zinc-500">Client</dt>
            <dd className="break-all">{auth.client}</dd>
          </>
        ) : null}
      </dl>

      {revocation ? (
        <div
          role="status"
          className={cx("flex items-start gap-2 rounded-md border px-3 py-2", revocationTones[revocation])}
        >
          <p className="min-w-0 flex-1 break-words">{revocationText(revocation, validUntil)}</p>
          {revocation === "failed" || revocation === "refresh_only" ? (
            <Button className="px-2 py-0.5 text-xs" onClick={() => setRevocation(null)}>
              Dismiss
            </Button>
          ) : null}
        </div>
      ) : null}

      {confirming ? (
        <fieldset
          aria-label={`Disconnect ${server.name}`}
          className="flex min-w-0 flex-wrap items-center gap-2"
          onKeyDown={(event) => {
            if (event.key === "Escape") {
              event.preventDefault();
              setConfirming(false);
            }
          }}
        >
          <p className="min-w-0 basis-full break-words text-zinc-800">
            Disconnect <span className="break-all font-mono">{server.name}</span>? Agents lose its tools until
            someone connects again.
          </p>
          <Button variant="danger" disabled={disconnect.isPending} onClick={() => disconnect.mutate()}>
            {disconnect.isPending ? "Disconnecting…" : "Confirm"}
          </Button>
          {/* The owner just pressed Disconnect, whose button is gone: the safe choice takes the focus. */}
          <Button autoFocus disabled={disconnect.isPending} onClick={() => setConfirming(false)}>
            Cancel
          </Button>
        </fieldset>
      ) : (
        <div className="flex flex-wrap items-center gap-2">
          {!auth.connected || waiting ? (
            <Button
              variant="primary"
              onClick={() => connect.mutate()}
              disabled={opening || !server.enabled}
              title={
                server.enabled
                  ? "Sign in at this server's authorization server"
                  : "This server is disabled in gatehouse.json"
              }
            >
              {opening ? "Opening sign-in…" : "Connect"}
            </Button>
          ) : null}
          {auth.connected ? (
            <Button
              variant="danger"
              disabled={opening}
              onClick={() => {
                disconnect.reset();
                setConfirming(true);
              }}
            >
              Disconnect
            </Button>
          ) : null}
        </div>
      )}

      {connect.isError ? <ErrorAlert>{errorWithCode(connect.error)}</ErrorAlert> : null}
      {disconnect.isError ? <ErrorAlert>{errorWithCode(disconnect.error)}</ErrorAlert> : null}
    </section>
  );
}

/** Scopes shown before "all N scopes" is pressed; a grant can carry dozens. */
const SCOPES_SHOWN = 12;

function ScopeList({ scopes, connected }: { scopes: string[]; connected: boolean }) {
  const [all, setAll] = useState(false);
  if (scopes.length === 0)
    return (
      <span className="text-zinc-500">
        {connected ? "none named in the grant" : "the ones the server says it needs"}
      </span>
    );
  return (
    <ul className="flex min-w-0 flex-wrap gap-1">
      {(all ? scopes : scopes.slice(0, SCOPES_SHOWN)).map((scope) => (
        <li
          key={scope}
          className="max-w-full break-all rounded bg-white px-1.5 py-0.5 font-mono text-xs text-zinc-700 ring-1 ring-inset ring-zinc-200"
        >
          {scope}
        </li>
      ))}
      {scopes.length > SCOPES_SHOWN && !all ? (
        <li>
          <button
            type="button"
            className="px-1 py-0.5 text-xs text-indigo-700 hover:underline"
            onClick={() => setAll(true)}
          >
            all {scopes.length} scopes
          </button>
        </li>
      ) : null}
    </ul>
  );
}

/**
 * The access token's expiry in words; the token itself is never part of the view. `renews` is
 * false while the server waits for a sign-in: the grant no longer renews, so the line must not say it does.
 */
function tokenExpiry(expiresAt: string | null, now: number, renews: boolean): string {
  const at = expiresAt === null ? Number.NaN : Date.parse(expiresAt);
  if (expiresAt === null || Number.isNaN(at))
    return renews ? "expiry not stated; the token renews automatically when refused" : "expiry not stated";
  if (at > now) {
    const when = `expires ${formatUntil(expiresAt, now)} (${formatDateTime(expiresAt)})`;
    return renews ? `${when}; the token renews automatically` : when;
  }
  const ago = `expired ${formatAge(expiresAt, now)}`;
  return renews ? `${ago}; the token renews automatically on the next call` : ago;
}

// The way back from a sign-in

interface SignInReturn {
  /** Null when the sign-in came back unmatched: used already, or never started here. */
  name: string | null;
  outcome: SignInOutcome;
}

function isSignInOutcome(value: string | null): value is SignInOutcome {
  return (signInOutcomes as readonly (string | null)[]).includes(value);
}

/**
 * The banner's sentence for a sign-in that came back: `success` for `connected`, `warning` for
 * an ending the owner can simply retry, `error` for a refusal that a retry will not fix alone.
 */
export function signInMessage(
  name: string,
  outcome: SignInOutcome,
): { tone: "success" | "warning" | "error"; text: string } {
  switch (outcome) {
    case "connected":
      return { tone: "success", text: `${name} is connected.` };
    case "denied":
      return {
        tone: "warning",
        text: `The sign-in to ${name} was cancelled or refused at the authorization server. Nothing was stored; press Connect to try again.`,
      };
    case "expired":
      return {
        tone: "warning",
        text: `The sign-in to ${name} took too long, or its answer had already been used. Press Connect again.`,
      };
    case "wrong_user":
      return {
        tone: "warning",
        text: `The sign-in to ${name} was started by another person or in another browser session, so it was not accepted. Press Connect here to sign in yourself.`,
      };
    case "issuer_mismatch":
      return {
        tone: "error",
        text: `The sign-in to ${name} was refused: the answer came from a different authorization server than the one Gatehouse asked. Nothing was stored.`,
      };
    case "refused_address":
      return {
        tone: "error",
        text: `The sign-in to ${name} was refused: an address it needs (the authorization server's metadata or token endpoint) is private or loopback, and this server has no allowPrivate in gatehouse.json.`,
      };
    case "failed":
      return {
        tone: "error",
        text: `The sign-in to ${name} failed. Press Connect to try again; the Gatehouse log says what went wrong.`,
      };
  }
}

/** The banner of a sign-in that came back without a server Gatehouse could name. */
function unmatchedMessage(outcome: SignInOutcome): { tone: "warning" | "error"; text: string } {
  return outcome === "expired"
    ? {
        tone: "warning",
        text: "A sign-in came back that Gatehouse could not match to one it started here: it was already used, or took too long. Press Connect again.",
      }
    : {
        tone: "error",
        text: "A sign-in failed. Press Connect to try again; the Gatehouse log says what went wrong.",
      };
}

/** A reason as the server side writes it (lower case, no full stop), as a sentence. */
function asSentence(text: string): string {
  const first = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?…]$/.test(first) ? first : `${first}.`;
}

const bannerTones = {
  success: "border-emerald-200 bg-emerald-50 text-emerald-900",
  warning: "border-amber-200 bg-amber-50 text-amber-900",
  error: "border-rose-200 bg-rose-50 text-rose-900",
} as const;

/**
 * Reads `?signin=<server>&outcome=<outcome>` (where `/oauth/callback` sends the browser), then
 * takes both out of the address so that a reload does not show the banner again. Keeps the
 * values it read until dismissed.
 */
function useSignInReturn(): [SignInReturn | null, () => void] {
  const params = useSearchParams();
  const router = useRouter();
  const pathname = usePathname();
  const [found, setFound] = useState<SignInReturn | null>(null);

  useEffect(() => {
    if (!params.has("signin") && !params.has("outcome")) return;
    const name = params.get("signin") || null;
    const outcome = params.get("outcome");
    // No name: a sign-in Gatehouse could not match to one it started (used already, or unknown).
    setFound(
      isSignInOutcome(outcome) && (name !== null || outcome !== "connected") ? { name, outcome } : null,
    );
    const rest = new URLSearchParams(params);
    rest.delete("signin");
    rest.delete("outcome");
    const query = rest.toString();
    router.replace(query ? `${pathname}?${query}` : pathname, { scroll: false });
  }, [params, router, pathname]);

  return [found, () => setFound(null)];
}

/**
 * The dismissible banner for a sign-in that came back to the Servers page. Shows only an outcome
 * it knows for a server in `servers` (so a crafted link cannot put its own words on the page), in
 * a sentence of ours; nothing else from the address is shown. Shows nothing until `servers` is known.
 */
export function SignInBanner({ servers }: { servers: readonly ServerView[] | undefined }) {
  const [found, dismiss] = useSignInReturn();
  if (!found || !servers) return null;
  if (found.name !== null && !servers.some((s) => s.name === found.name)) return null;
  const { tone, text } =
    found.name === null ? unmatchedMessage(found.outcome) : signInMessage(found.name, found.outcome);
  return (
    <div
      role={tone === "success" ? "status" : "alert"}
      data-testid="sign-in-banner"
      className={cx("mb-4 flex items-start gap-3 rounded-md border px-3 py-2 text-sm", bannerTones[tone])}
    >
      <p className="min-w-0 flex-1 break-words">{text}</p>
      <Button className="px-2 py-0.5 text-xs" onClick={dismiss} aria-label="Dismiss sign-in message">
        Dismiss
      </Button>
    </div>
  );
}
