/**
 * One error vocabulary for the whole product. Server code throws `GatehouseError` with a
 * stable string code; the route wrapper maps the code to an HTTP status with `statusFor`, and
 * the browser's API client rebuilds the same error from `{error: {code, message}}`.
 */
export const errorStatus = {
  bad_request: 400,
  invalid_body: 400,
  payload_too_large: 413,
  invalid_arguments: 422,
  unauthenticated: 401,
  invalid_credentials: 401,
  forbidden: 403,
  bad_origin: 403,
  bad_host: 403,
  self_approval: 403,
  denied_by_rule: 403,
  /** The agent's token has a tool set that does not hold the tool: nothing was sent. */
  tool_not_in_set: 403,
  not_found: 404,
  tool_not_found: 404,
  call_not_found: 404,
  conflict: 409,
  already_exists: 409,
  already_decided: 409,
  arguments_changed: 409,
  already_approved: 409,
  grant_not_allowed: 409,
  grant_not_found: 404,
  tool_not_enabled: 409,
  tool_changed: 409,
  tool_gone: 409,
  tool_excluded: 409,
  tool_over_cap: 409,
  enabled_in_file: 409,
  unset_variable: 409,
  tool_unusable: 409,
  setup_done: 409,
  not_oauth: 409,
  not_signed_in: 409,
  sign_in_unavailable: 502,
  invalid_setup_code: 403,
  too_many_attempts: 429,
  /** An agent's `callsPerMinute` is used up: `Retry-After` says when the next call may go. */
  rate_limited: 429,
  /** An agent has `maxPendingCalls` waiting: the next call that would wait is refused. */
  too_many_pending: 429,
  /** An agent has `maxConcurrentCalls` running: the next call that would run at once is refused. */
  too_many_concurrent_calls: 429,
  server_unavailable: 502,
  upstream_error: 502,
  upstream_timeout: 504,
  /** A stdio server runs on another replica, which could not be reached: nothing was sent to it. */
  upstream_elsewhere: 502,
  store_busy: 503,
  store_full: 507,
  store_unavailable: 503,
  /** The store cannot be used as configured (a bad DATABASE_URL, a schema newer than this build): a start error. */
  store_config: 500,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/**
 * Next.js bundles server modules more than once (instrumentation and each route get their own
 * copy), so a plain `instanceof` would fail across copies; a registry-wide symbol brands them.
 */
const BRAND = Symbol.for("gatehouse.error");

export class GatehouseError extends Error {
  readonly code: ErrorCode;
  /** When to try again (seconds), sent as `Retry-After`; absent: not said. */
  readonly retryAfterSeconds?: number;
  readonly [BRAND] = true;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    this.name = "GatehouseError";
    this.code = code;
    if (options?.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    // A subclass inherits this method: for it, the ordinary prototype check (else every
    // GatehouseError would pass for a TooManyAttempts). `this` is the class asked about.
    // biome-ignore lint/complexity/noThisInStatic: the receiver is the subclass, not GatehouseError
    if (this !== GatehouseError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(errorStatus, value);
}

/** The JSON body of every API error response. */
export interface ErrorBody {
  error: { code: string; message: string };
}
