import path from "node:path";
import { REPO_ROOT } from "@/test/support/runtime";

/** The careless template server (see its header): lists templates, serves any URI, says what it was asked. */
export const TEMPLATES_SERVER = path.join(REPO_ROOT, "test/fixtures/servers/templates.mjs");

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const RESERVED = /^[:/?#[\]@!$&'()*+,;=]$/;

/** `value` percent-encoded as RFC 6570 §3.2.1 does: UTF-8, uppercase hex; `reserved` keeps reserved characters and triplets. */
function encode(value: string, reserved: boolean): string {
  let out = "";
  for (let i = 0; i < value.length; ) {
    const cp = value.codePointAt(i) ?? 0;
    const ch = String.fromCodePoint(cp);
    i += ch.length;
    if (UNRESERVED.test(ch) || (reserved && RESERVED.test(ch))) out += ch;
    else if (reserved && ch === "%" && /^[0-9A-Fa-f]{2}$/.test(value.slice(i, i + 2))) out += ch;
    else
      for (const byte of Buffer.from(ch, "utf8"))
        out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const OPS: Record<string, { first: string; sep: string; named: boolean; ifemp: string; reserved: boolean }> =
  {
    "": { first: "", sep: ",", named: false, ifemp: "", reserved: false },
    "+": { first: "", sep: ",", named: false, ifemp: "", reserved: true },
    "#": { first: "#", sep: ",", named: false, ifemp: "", reserved: true },
    ".": { first: ".", sep: ".", named: false, ifemp: "", reserved: false },
    "/": { first: "/", sep: "/", named: false, ifemp: "", reserved: false },
    ";": { first: ";", sep: ";", named: true, ifemp: "", reserved: false },
    "?": { first: "?", sep: "&", named: true, ifemp: "=", reserved: false },
    "&": { first: "&", sep: "&", named: true, ifemp: "=", reserved: false },
  };

/**
 * An RFC 6570 expansion of a level 1–3 template with string values (a variable missing from
 * `vars` is undefined), written from §3.2.1's algorithm and apart from the matcher it checks
 * (uri-template.ts), as an agent's client would expand a listed template.
 */
export function expandTemplate(template: string, vars: Record<string, string | undefined>): string {
  return template.replace(/\{([^}]*)\}/g, (_, body: string) => {
    const opChar = body[0] && body[0] in OPS && body[0] !== "" ? body[0] : "";
    const op = OPS[opChar] ?? { first: "", sep: ",", named: false, ifemp: "", reserved: false };
    const items = body
      .slice(opChar.length)
      .split(",")
      .flatMap((name) => {
        const value = vars[name];
        if (value === undefined) return [];
        if (!op.named) return [encode(value, op.reserved)];
        return [value === "" ? `${name}${op.ifemp}` : `${name}=${encode(value, op.reserved)}`];
      });
    return items.length === 0 ? "" : op.first + items.join(op.sep);
  });
}
