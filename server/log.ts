import "server-only";

type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

// Next.js evaluates server modules more than once (instrumentation, each route, server/main.ts),
// so the registry lives on globalThis: a secret registered by one copy is redacted by every copy.
const SECRETS = Symbol.for("gatehouse.log.secrets");
const holder = globalThis as { [SECRETS]?: Set<string> };
holder[SECRETS] ??= new Set<string>();
const secrets: Set<string> = holder[SECRETS];

/**
 * Registers values (header and env values from the config) that must never be written to a
 * log line. Values shorter than 4 characters are ignored: redacting "1" would mangle every line.
 */
export function registerSecrets(values: Iterable<string>): void {
  for (const v of values) if (v.length >= 4) secrets.add(v);
}

/** Replaces every registered secret in `text` with `[redacted]`. */
export function redact(text: string): string {
  let out = text;
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join("[redacted]");
  return out;
}

function threshold(): number {
  const l = (process.env.GATEHOUSE_LOG_LEVEL ?? "info") as Level;
  return order[l] ?? order.info;
}

function write(level: Level, scope: string, message: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold()) return;
  const extra = fields && Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields)}` : "";
  const line = redact(`${new Date().toISOString()} ${level.toUpperCase()} [${scope}] ${message}${extra}`);
  (level === "error" || level === "warn" ? process.stderr : process.stdout).write(`${line}\n`);
}

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** A logger whose lines are prefixed with `[scope]` and pass through `redact`. */
export function logger(scope: string): Logger {
  return {
    debug: (m, f) => write("debug", scope, m, f),
    info: (m, f) => write("info", scope, m, f),
    warn: (m, f) => write("warn", scope, m, f),
    error: (m, f) => write("error", scope, m, f),
  };
}
