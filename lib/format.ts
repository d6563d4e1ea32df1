/** Small, pure formatting helpers for the UI. Times are shown in the browser's local zone. */
import { GatehouseError } from "@/lib/errors";

function pad(n: number): string {
  return n.toString().padStart(2, "0");
}

function toDate(value: string | number | Date): Date | null {
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

/** `2025-01-31 13:04:05` in local time; the raw value when it is not a date. */
export function formatDateTime(value: string | null | undefined): string {
  if (value == null) return "—";
  const d = toDate(value);
  if (!d) return value;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(
    d.getMinutes(),
  )}:${pad(d.getSeconds())}`;
}

function span(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.floor(hours / 24)} d`;
}

/** `12 s ago`, `3 min ago`, `5 h ago`, `2 d ago`. A time slightly in the future (clock skew) is `0 s ago`. */
export function formatAge(value: string, now: number): string {
  const d = toDate(value);
  if (!d) return value;
  const seconds = Math.max(0, Math.floor((now - d.getTime()) / 1000));
  return `${span(seconds)} ago`;
}

/** `in 12 s` for a future time, `now` once it has passed. */
export function formatUntil(value: string, now: number): string {
  const d = toDate(value);
  if (!d) return value;
  const seconds = Math.ceil((d.getTime() - now) / 1000);
  return seconds <= 0 ? "now" : `in ${span(seconds)}`;
}

/** Arguments exactly as sent, pretty-printed; never throws (a cycle or BigInt cannot come from JSON, but be safe). */
export function prettyJson(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2) ?? "undefined";
  } catch {
    return String(value);
  }
}

/** A message fit to show a person, from whatever was thrown. */
export function errorMessage(error: unknown): string {
  if (error instanceof GatehouseError) return error.message;
  if (error instanceof Error && error.message) return error.message;
  return "Something went wrong.";
}

/** `error message (code)` so that a reviewer can tell `already_decided` from other failures. */
export function errorWithCode(error: unknown): string {
  if (error instanceof GatehouseError) return `${error.message} (${error.code})`;
  return errorMessage(error);
}

const numbers = new Intl.NumberFormat("en");
/** `1,200` rather than `1200`. */
export function formatCount(n: number): string {
  return numbers.format(n);
}

/** The text with its first letter in capitals, for a phrase that stands as a sentence of its own. */
export function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

// Confirm flow

/** `14:59` or `1:02:03` left until a deadline, rounded up to whole seconds; `0:00` once it passed. */
export function formatCountdown(ms: number): string {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

/** `850 ms`, `2.4 s`, `3 min 12 s`, `15 min`, `2 h 5 min`, `2 h` (a zero second or minute is left out). */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1).replace(/\.0$/, "")} s`;
  const seconds = Math.round(ms / 1000);
  const and = (n: number, unit: string) => (n === 0 ? "" : ` ${n} ${unit}`);
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min${and(seconds % 60, "s")}`;
  return `${Math.floor(seconds / 3600)} h${and(Math.floor((seconds % 3600) / 60), "min")}`;
}

/** `812 B`, `64 KiB`, `1.2 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0).replace(/\.0$/, "")} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1).replace(/\.0$/, "")} MiB`;
}
