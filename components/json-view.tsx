"use client";

import { type ReactNode, useState } from "react";
import { cx } from "@/components/ui";
import { FOLD_ENTRIES, foldString, formatCount, jsonStringParts } from "@/lib/json-view";

const foldButton =
  "mx-1 rounded bg-zinc-700 px-1.5 py-px font-sans text-[0.6875rem] font-medium text-zinc-100 hover:bg-zinc-600 focus-visible:outline-2 focus-visible:outline-indigo-400";

/**
 * Untrusted JSON as a person should read it before deciding: pretty-printed, every string an
 * escaped JSON literal (hidden characters marked as `\u202e`, or `\u{e0041}` beyond the BMP, with
 * a tooltip naming each; lib/hidden-text.ts lists them), long strings and long lists folded with
 * a button that says how much is hidden. Nothing is ever cut without saying so, and the value
 * shown is never altered.
 */
export function JsonView({ value, className }: { value: unknown; className?: string }) {
  return (
    <pre
      className={cx(
        "max-h-[32rem] overflow-auto whitespace-pre-wrap break-words rounded-md bg-zinc-950 px-3 py-2 font-mono text-xs leading-5 text-zinc-100",
        className,
      )}
    >
      <JsonNode value={value} indent="" />
    </pre>
  );
}

function JsonNode({ value, indent }: { value: unknown; indent: string }): ReactNode {
  if (typeof value === "string") return <JsonStringValue value={value} />;
  if (value === null || typeof value === "number" || typeof value === "boolean") {
    return <span className="text-sky-300">{JSON.stringify(value)}</span>;
  }
  if (Array.isArray(value)) {
    return <JsonEntries entries={value.map((v) => [null, v] as const)} open="[" close="]" indent={indent} />;
  }
  if (typeof value === "object") {
    return (
      <JsonEntries
        entries={Object.entries(value as Record<string, unknown>)}
        open="{"
        close="}"
        indent={indent}
      />
    );
  }
  // undefined, functions, bigint: cannot come from JSON, but say what it is rather than hide it.
  return <span className="text-zinc-400">{String(value)}</span>;
}

function JsonEntries({
  entries,
  open,
  close,
  indent,
}: {
  entries: readonly (readonly [string | null, unknown])[];
  open: string;
  close: string;
  indent: string;
}) {
  const [showAll, setShowAll] = useState(false);
  if (entries.length === 0) return `${open}${close}`;
  const inner = `${indent}  `;
  const shown = showAll ? entries : entries.slice(0, FOLD_ENTRIES);
  const hidden = entries.length - shown.length;
  return (
    <>
      {open}
      {shown.map(([key, v], i) => (
        // Entries never reorder, and object keys may repeat nothing: the index is a stable key.
        // biome-ignore lint/suspicious/noArrayIndexKey: see above.
        <span key={i}>
          {"\n"}
          {inner}
          {key !== null ? (
            <>
              <StringLiteral value={key} className="text-violet-300" />
              {": "}
            </>
          ) : null}
          <JsonNode value={v} indent={inner} />
          {i < entries.length - 1 ? "," : ""}
        </span>
      ))}
      {hidden > 0 ? (
        <>
          {"\n"}
          {inner}
          <button type="button" className={foldButton} onClick={() => setShowAll(true)}>
            show {formatCount(hidden)} more {hidden === 1 ? "entry" : "entries"}
          </button>
        </>
      ) : entries.length > FOLD_ENTRIES ? (
        <>
          {"\n"}
          {inner}
          <button type="button" className={foldButton} onClick={() => setShowAll(false)}>
            fold
          </button>
        </>
      ) : null}
      {"\n"}
      {indent}
      {close}
    </>
  );
}

/**
 * A string as its JSON literal; the escapes of hidden characters are highlighted and named in
 * their tooltip. `unterminated` leaves out the closing quote (the string goes on behind a fold).
 */
function StringLiteral({
  value,
  className,
  unterminated = false,
}: {
  value: string;
  className: string;
  unterminated?: boolean;
}) {
  const parts = jsonStringParts(value);
  const last = parts.at(-1);
  if (unterminated && last) parts[parts.length - 1] = { ...last, text: last.text.slice(0, -1) };
  return (
    <span className={className}>
      {parts.map((part, i) =>
        part.hidden ? (
          // Parts never reorder: the index is a stable key.
          // biome-ignore lint/suspicious/noArrayIndexKey: see above.
          <mark key={i} title={part.title} className={hiddenMark}>
            {part.text}
          </mark>
        ) : (
          part.text
        ),
      )}
    </span>
  );
}

const hiddenMark = "rounded-sm bg-amber-300 px-0.5 text-zinc-950";

function JsonStringValue({ value }: { value: string }) {
  const [expanded, setExpanded] = useState(false);
  const fold = foldString(value);
  if (!fold) return <StringLiteral value={value} className="text-emerald-300" />;
  if (expanded) {
    return (
      <>
        <StringLiteral value={value} className="text-emerald-300" />
        <button type="button" className={foldButton} onClick={() => setExpanded(false)}>
          fold
        </button>
      </>
    );
  }
  // The head without its closing quote: the string visibly goes on.
  return (
    <>
      <StringLiteral value={fold.head} className="text-emerald-300" unterminated />
      <span className="text-zinc-400">…</span>
      <button
        type="button"
        className={foldButton}
        aria-label={`Show all ${formatCount(fold.total)} characters (${formatCount(fold.hidden)} more)`}
        onClick={() => setExpanded(true)}
      >
        +{formatCount(fold.hidden)} characters
      </button>
    </>
  );
}
