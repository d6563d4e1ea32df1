/**
 * Untrusted text (a tool server's description) shown as plain React text, with the characters
 * that hide or reorder text — controls, bidirectional overrides and isolates, zero-width marks —
 * drawn as visible markers instead of being obeyed. The catalogue strips them from what agents
 * see; a before/after diff shows the original, and an owner must see that they are there.
 */
import { Fragment } from "react";

// The same set the server strips (server/catalogue/definition.ts), minus tab and newline.
const HIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
  /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2066-\u2069\uFEFF]/g;

const NAMES: Record<number, string> = {
  8203: "zero-width space",
  8204: "zero-width non-joiner",
  8205: "zero-width joiner",
  8206: "left-to-right mark",
  8207: "right-to-left mark",
  8234: "left-to-right embedding",
  8235: "right-to-left embedding",
  8236: "pop directional formatting",
  8237: "left-to-right override",
  8238: "right-to-left override",
  8294: "left-to-right isolate",
  8295: "right-to-left isolate",
  8296: "first strong isolate",
  8297: "pop directional isolate",
  65279: "zero-width no-break space",
};

function codeOf(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

export function VisibleText({ text }: { text: string }) {
  const parts: (string | { ch: string })[] = [];
  let at = 0;
  for (const match of text.matchAll(HIDDEN)) {
    const index = match.index ?? 0;
    if (index > at) parts.push(text.slice(at, index));
    parts.push({ ch: match[0] });
    at = index + match[0].length;
  }
  if (at < text.length) parts.push(text.slice(at));
  return (
    <>
      {parts.map((part, i) =>
        typeof part === "string" ? (
          // biome-ignore lint/suspicious/noArrayIndexKey: the parts of one text never reorder.
          <Fragment key={i}>{part}</Fragment>
        ) : (
          <abbr
            // biome-ignore lint/suspicious/noArrayIndexKey: the parts of one text never reorder.
            key={i}
            title={`hidden character ${codeOf(part.ch)}${NAMES[part.ch.codePointAt(0) ?? 0] ? ` (${NAMES[part.ch.codePointAt(0) ?? 0]})` : ""}`}
            className="mx-px rounded-sm bg-amber-200 px-0.5 font-mono text-[0.7rem] text-amber-950 no-underline"
          >
            {`⟨${codeOf(part.ch)}⟩`}
          </abbr>
        ),
      )}
    </>
  );
}
