import "server-only";

/**
 * RFC 6570 URI templates of levels 1–3, parsed strictly and matched exactly: a URI matches a
 * template when the template's expansion yields it for some string value (or no value) of each
 * of its variables — the set of URIs the template describes, nothing more. Lists and
 * associative arrays are not values here, and level-4 modifiers (`{var:3}`, `{var*}`) are not
 * parsed: a template that uses them is no template to this module (null).
 *
 * Matching runs an NFA built from the template (Thompson's construction) over the URI, so its
 * cost is bounded by the URI's length times the template's size whatever the template says,
 * and a caller's step budget bounds it further; a regular expression built from an untrusted
 * template could backtrack for as long as its author liked. (The v1 SDK's `UriTemplate.match`
 * is not exact: `{+path}` becomes `(.+)`, so a space, a brace or a bare `%` passes; `{var}`
 * admits any character but `/` and `,`; `;` is not an operator.)
 *
 * The one liberty taken beyond the expansion's own output: a percent-encoded triplet in a value
 * may have its hex digits in either case (RFC 3986 §2.1 makes them the same octet).
 */

/** Longest template parsed; a longer one is none. */
export const MAX_TEMPLATE_CHARS = 1024;
/** Most variables in one expression (each adds a state to every later one's entries). */
const MAX_VARIABLES_PER_EXPRESSION = 16;

type Operator = "" | "+" | "#" | "." | "/" | ";" | "?" | "&";

/** RFC 6570 §3.2.1's table of what each operator puts first, between values, and how. */
const OPERATORS: Record<Operator, { first: string; sep: string; named: boolean; reserved: boolean }> = {
  "": { first: "", sep: ",", named: false, reserved: false },
  "+": { first: "", sep: ",", named: false, reserved: true },
  "#": { first: "#", sep: ",", named: false, reserved: true },
  ".": { first: ".", sep: ".", named: false, reserved: false },
  "/": { first: "/", sep: "/", named: false, reserved: false },
  ";": { first: ";", sep: ";", named: true, reserved: false },
  "?": { first: "?", sep: "&", named: true, reserved: false },
  "&": { first: "&", sep: "&", named: true, reserved: false },
};

/** varname = varchar *( ["."] varchar ); varchar = ALPHA / DIGIT / "_" / pct-encoded. */
const VARNAME = /^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$/;

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const RESERVED = /[:/?#[\]@!$&'()*+,;=]/;
const HEX = /[0-9A-Fa-f]/;

/** The character a state's one edge takes: none (only empty moves), one exact character, or a class. */
const Edge = { None: 0, Char: 1, Unreserved: 2, UnreservedOrReserved: 3, Hex: 4 } as const;
type Edge = (typeof Edge)[keyof typeof Edge];

/** Class membership per ASCII code, one bit per {@link Edge} class. */
const CLASS_BITS = (() => {
  const bits = new Uint8Array(128);
  for (let c = 0; c < 128; c++) {
    const ch = String.fromCharCode(c);
    if (UNRESERVED.test(ch))
      bits[c] = (bits[c] ?? 0) | (1 << Edge.Unreserved) | (1 << Edge.UnreservedOrReserved);
    if (RESERVED.test(ch)) bits[c] = (bits[c] ?? 0) | (1 << Edge.UnreservedOrReserved);
    if (HEX.test(ch)) bits[c] = (bits[c] ?? 0) | (1 << Edge.Hex);
  }
  return bits;
})();

/**
 * A literal character as RFC 6570 §2.1 allows it (ASCII only here): printable, and none of
 * space, `"`, `'`, `%` (but in a triplet), `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`. Each of
 * them is unreserved or reserved, so an expansion copies it as it is.
 */
const LITERAL = /^[!#$&()*+,\-./0-9:;=?@A-Z[\]_a-z~]$/;

/** A parsed template: the template as listed, and the automaton its URIs are matched with. */
export interface UriTemplate {
  readonly template: string;
  readonly nfa: Nfa;
}

interface Nfa {
  /** Per state: its {@link Edge} kind, the char code for {@link Edge.Char}, the state it leads to. */
  readonly kind: Uint8Array;
  readonly code: Uint16Array;
  readonly next: Int32Array;
  readonly eps: readonly (readonly number[])[];
  readonly start: number;
  readonly accept: number;
}

/** Builds the NFA; each method returns a fragment `[start, end]` whose end has no edge yet. */
class Builder {
  readonly kind: number[] = [];
  readonly code: number[] = [];
  readonly next: number[] = [];
  readonly eps: number[][] = [];

  state(): number {
    this.kind.push(Edge.None);
    this.code.push(0);
    this.next.push(-1);
    this.eps.push([]);
    return this.kind.length - 1;
  }

  private edge(from: number, kind: Edge, to: number, code = 0): void {
    this.kind[from] = kind;
    this.code[from] = code;
    this.next[from] = to;
  }

  link(from: number, ...to: number[]): void {
    this.eps[from]?.push(...to);
  }

  literal(text: string): [number, number] {
    const start = this.state();
    let at = start;
    for (let i = 0; i < text.length; i++) {
      const to = this.state();
      this.edge(at, Edge.Char, to, text.charCodeAt(i));
      at = to;
    }
    return [start, at];
  }

  /** One character of a value: an allowed one, or a percent-encoded triplet. */
  private token(from: number, to: number, reserved: boolean): void {
    const plain = this.state();
    const pct = this.state();
    const hex1 = this.state();
    const hex2 = this.state();
    this.link(from, plain, pct);
    this.edge(plain, reserved ? Edge.UnreservedOrReserved : Edge.Unreserved, to);
    this.edge(pct, Edge.Char, hex1, 0x25);
    this.edge(hex1, Edge.Hex, hex2);
    this.edge(hex2, Edge.Hex, to);
  }

  /** A value as its expansion writes it, possibly empty. */
  value(reserved: boolean): [number, number] {
    const loop = this.state();
    this.token(loop, loop, reserved);
    return [loop, loop];
  }

  /** A value that is not empty. */
  nonEmptyValue(reserved: boolean): [number, number] {
    const start = this.state();
    const [loop, end] = this.value(reserved);
    this.token(start, loop, reserved);
    return [start, end];
  }

  /**
   * One expression: nothing (no variable has a value), or the operator's first string and the
   * values of the variables that have one, in the template's order, each at most once, joined
   * by its separator.
   */
  expression(op: Operator, names: readonly string[]): [number, number] {
    const { first, sep, named, reserved } = OPERATORS[op];
    const start = this.state();
    const end = this.state();
    this.link(start, end);
    const [firstStart, firstEnd] = this.literal(first);
    this.link(start, firstStart);
    const entries: number[] = [];
    const items: number[] = [];
    for (const name of names) {
      const [itemStart, itemEnd] = named ? this.namedItem(op, name) : this.value(reserved);
      entries.push(itemStart);
      items.push(itemEnd);
    }
    this.link(firstEnd, ...entries);
    items.forEach((itemEnd, i) => {
      this.link(itemEnd, end);
      if (i === names.length - 1) return;
      const [sepStart, sepEnd] = this.literal(sep);
      this.link(itemEnd, sepStart);
      this.link(sepEnd, ...entries.slice(i + 1));
    });
    return [start, end];
  }

  /** `;name` or `;name=value` (an empty value drops the `=`); `?name=value` and `&name=value` always keep it. */
  private namedItem(op: Operator, name: string): [number, number] {
    const [start, nameEnd] = this.literal(name);
    const [eqStart, eqEnd] = this.literal("=");
    this.link(nameEnd, eqStart);
    const [valueStart, valueEnd] = op === ";" ? this.nonEmptyValue(false) : this.value(false);
    this.link(eqEnd, valueStart);
    if (op !== ";") return [start, valueEnd];
    const end = this.state();
    this.link(nameEnd, end);
    this.link(valueEnd, end);
    return [start, end];
  }
}

/**
 * `template` parsed, or null when it is not a level 1–3 template made of printable ASCII within
 * {@link MAX_TEMPLATE_CHARS}: an unclosed or nested brace, a stray `}`, an operator RFC 6570
 * reserves (`=`, `,`, `!`, `@`, `|`), a level-4 modifier, a bad variable name, a literal
 * character RFC 6570 does not allow, a `%` that starts no triplet. Anything outside printable
 * ASCII is refused rather than encoded: it would show an agent hidden characters, and every
 * template can be written without it.
 */
export function parseUriTemplate(template: string): UriTemplate | null {
  if (template.length === 0 || template.length > MAX_TEMPLATE_CHARS) return null;
  const b = new Builder();
  const start = b.state();
  let at = start;
  const append = ([fragStart, fragEnd]: [number, number]) => {
    b.link(at, fragStart);
    at = fragEnd;
  };
  let literal = "";
  for (let i = 0; i < template.length; ) {
    const ch = template[i] ?? "";
    if (ch === "{") {
      const close = template.indexOf("}", i + 1);
      if (close < 0) return null;
      const body = template.slice(i + 1, close);
      const op = (body[0] && Object.hasOwn(OPERATORS, body[0]) ? body[0] : "") as Operator;
      const names = body.slice(op.length).split(",");
      if (names.length > MAX_VARIABLES_PER_EXPRESSION || !names.every((n) => VARNAME.test(n))) return null;
      if (literal) append(b.literal(literal));
      literal = "";
      append(b.expression(op, names));
      i = close + 1;
    } else if (ch === "%") {
      const triplet = template.slice(i, i + 3);
      if (!/^%[0-9A-Fa-f]{2}$/.test(triplet)) return null;
      literal += triplet;
      i += 3;
    } else {
      if (!LITERAL.test(ch)) return null;
      literal += ch;
      i++;
    }
  }
  if (literal) append(b.literal(literal));
  return {
    template,
    nfa: {
      kind: Uint8Array.from(b.kind),
      code: Uint16Array.from(b.code),
      next: Int32Array.from(b.next),
      eps: b.eps,
      start,
      accept: at,
    },
  };
}

/** Work a match may do: states visited, summed over the URI's characters. */
export interface MatchBudget {
  steps: number;
}

/**
 * Whether `uri` is an expansion of `t` (see the top of this file). Each state visited costs
 * `budget` one step; when it runs out the answer is false and `budget.steps` is negative, so a
 * caller matching many templates can tell "no" from "gave up".
 */
export function matchesUriTemplate(t: UriTemplate, uri: string, budget: MatchBudget): boolean {
  const { kind, code, next, eps, start, accept } = t.nfa;
  const seen = new Int32Array(kind.length).fill(-1);
  let current: number[] = [];
  const close = (from: number, into: number[], round: number) => {
    const stack = [from];
    while (stack.length > 0) {
      const s = stack.pop() ?? 0;
      if (seen[s] === round) continue;
      seen[s] = round;
      into.push(s);
      for (const to of eps[s] ?? []) if (seen[to] !== round) stack.push(to);
    }
  };
  close(start, current, 0);
  for (let i = 0; i < uri.length; i++) {
    const c = uri.charCodeAt(i);
    // An expansion is ASCII: its values are percent-encoded, its literals checked above.
    if (c >= 128) return false;
    budget.steps -= current.length;
    if (budget.steps < 0) return false;
    const following: number[] = [];
    for (const s of current) {
      const k = kind[s] ?? Edge.None;
      if (k === Edge.None) continue;
      const hit = k === Edge.Char ? code[s] === c : ((CLASS_BITS[c] ?? 0) & (1 << k)) !== 0;
      if (hit) close(next[s] ?? 0, following, i + 1);
    }
    if (following.length === 0) return false;
    current = following;
  }
  return current.includes(accept);
}
