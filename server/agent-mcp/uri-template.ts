import "server-only";

/**
 * RFC 6570 URI templates of levels 1–3, parsed strictly and matched exactly: a URI matches a
 * template when the template's expansion yields it for some string value (or no value) of each
 * of its variables — the set of URIs the template describes, nothing more. Lists and
 * associative arrays are not values here, and level-4 modifiers (`{var:3}`, `{var*}`) are not
 * parsed: a template that uses them is no template to this module (null).
 *
 * Matching runs an NFA built from the template (Thompson's construction) over the URI, so its
 * cost is bounded by the URI's length times the template's size whatever the template says: the
 * size is bounded ({@link MAX_TEMPLATE_STATES}, counted before anything is built) and a caller's
 * step budget bounds the cost further; a regular expression built from an untrusted
 * template could backtrack for as long as its author liked. (The v1 SDK's `UriTemplate.match`
 * is not exact: `{+path}` becomes `(.+)`, so a space, a brace or a bare `%` passes; `{var}`
 * admits any character but `/` and `,`; `;` is not an operator.)
 *
 * The one liberty taken beyond the expansion's own output: a percent-encoded triplet in a value
 * may have its hex digits in either case (RFC 3986 §2.1 makes them the same octet).
 */

/** Longest template parsed; a longer one is none. */
export const MAX_TEMPLATE_CHARS = 1024;
/** Most variables in one expression (each adds an empty move from every earlier one's separator). */
const MAX_VARIABLES_PER_EXPRESSION = 16;
/**
 * Most states of a template's automaton; a larger template is none. 12 expressions `{;a,…,p}` of
 * 16 variables fit, 21 `{a,…,p}`, and `{a}` as often as MAX_TEMPLATE_CHARS allows; each state
 * keeps about ten bytes, and a match may visit each once a character.
 */
export const MAX_TEMPLATE_STATES = 2000;

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
export const Edge = { None: 0, Char: 1, Unreserved: 2, UnreservedOrReserved: 3, Hex: 4 } as const;
export type Edge = (typeof Edge)[keyof typeof Edge];

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

/** State numbers and offsets: 16 bits when they fit (they do within {@link MAX_TEMPLATE_STATES}). */
type Index = Uint16Array | Uint32Array;

/**
 * The automaton in flat arrays, a few bytes a state (an array per state cost about a hundred):
 * per state, its one {@link Edge}'s kind, the char code an {@link Edge.Char} takes and the state
 * the edge leads to; the states its empty moves lead to are `epsTo[epsStart[s] .. epsStart[s + 1]]`.
 */
export interface Nfa {
  readonly kind: Uint8Array;
  readonly code: Uint8Array;
  readonly next: Index;
  readonly epsStart: Index;
  readonly epsTo: Index;
  readonly start: number;
  readonly accept: number;
}

/** Where a {@link Builder} writes: per state its edge, and the empty moves in the order they are made. */
interface Out {
  kind: Uint8Array;
  code: Uint8Array;
  next: Index;
  from: Index;
  to: Index;
}

/**
 * Builds the NFA into `out`, or, without it, only counts its states and empty moves: so a template
 * too large is refused before anything is allocated, and the arrays are allocated once, at size.
 * Each method returns a fragment `[start, end]` whose end has no edge yet; a `from` argument is a
 * state without an edge for the fragment to start at, which saves a state and an empty move.
 */
class Builder {
  states = 0;
  moves = 0;

  constructor(private readonly out: Out | null) {}

  state(): number {
    return this.states++;
  }

  private edge(from: number, kind: Edge, to: number, code = 0): void {
    if (!this.out) return;
    this.out.kind[from] = kind;
    this.out.code[from] = code;
    this.out.next[from] = to;
  }

  link(from: number, ...to: number[]): void {
    for (const t of to) {
      if (this.out) {
        this.out.from[this.moves] = from;
        this.out.to[this.moves] = t;
      }
      this.moves++;
    }
  }

  literal(text: string, from = this.state()): [number, number] {
    let at = from;
    for (let i = 0; i < text.length; i++) {
      const to = this.state();
      this.edge(at, Edge.Char, to, text.charCodeAt(i));
      at = to;
    }
    return [from, at];
  }

  /**
   * `loop` takes an allowed character back to itself, or moves to a percent-encoded triplet that
   * ends back at it: any number of a value's characters. Returns where the triplet starts.
   */
  private loop(loop: number, reserved: boolean): number {
    const pct = this.state();
    const hex1 = this.state();
    const hex2 = this.state();
    this.edge(loop, reserved ? Edge.UnreservedOrReserved : Edge.Unreserved, loop);
    this.link(loop, pct);
    this.edge(pct, Edge.Char, hex1, 0x25);
    this.edge(hex1, Edge.Hex, hex2);
    this.edge(hex2, Edge.Hex, loop);
    return pct;
  }

  /** A value as its expansion writes it, possibly empty. */
  value(reserved: boolean, from = this.state()): [number, number] {
    this.loop(from, reserved);
    return [from, from];
  }

  /** A value that is not empty: its first character or triplet from `from`, the rest in a loop. */
  nonEmptyValue(reserved: boolean, from = this.state()): [number, number] {
    const loop = this.state();
    const pct = this.loop(loop, reserved);
    this.edge(from, reserved ? Edge.UnreservedOrReserved : Edge.Unreserved, loop);
    this.link(from, pct);
    return [from, loop];
  }

  /**
   * One expression: nothing (no variable has a value), or the operator's first string and the
   * values of the variables that have one, in the template's order, each at most once, joined
   * by its separator.
   */
  expression(op: Operator, names: readonly string[], start = this.state()): [number, number] {
    const { first, sep, named, reserved } = OPERATORS[op];
    const end = this.state();
    this.link(start, end);
    const [, firstEnd] = this.literal(first, start);
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
    const eq = this.state();
    this.edge(nameEnd, Edge.Char, eq, 0x3d);
    if (op !== ";") return [start, this.value(false, eq)[1]];
    const [, valueEnd] = this.nonEmptyValue(false, eq);
    const end = this.state();
    this.link(nameEnd, end);
    this.link(valueEnd, end);
    return [start, end];
  }
}

/** A template in pieces: literal text (triplets kept as written), or an expression. */
type Part = string | { op: Operator; names: string[] };

/** `template` in pieces, or why it is no level 1–3 template of printable ASCII. */
function partsOf(template: string): Part[] | string {
  if (template.length === 0) return "empty";
  if (template.length > MAX_TEMPLATE_CHARS) return `longer than ${MAX_TEMPLATE_CHARS} characters`;
  const parts: Part[] = [];
  let literal = "";
  for (let i = 0; i < template.length; ) {
    const ch = template[i] ?? "";
    if (ch === "{") {
      const close = template.indexOf("}", i + 1);
      if (close < 0) return "an unclosed brace";
      const body = template.slice(i + 1, close);
      const op = (body[0] && Object.hasOwn(OPERATORS, body[0]) ? body[0] : "") as Operator;
      const names = body.slice(op.length).split(",");
      if (names.length > MAX_VARIABLES_PER_EXPRESSION)
        return `more than ${MAX_VARIABLES_PER_EXPRESSION} variables in an expression`;
      if (!names.every((n) => VARNAME.test(n))) return "an expression that is no level 1–3 expression";
      if (literal) parts.push(literal);
      literal = "";
      parts.push({ op, names });
      i = close + 1;
    } else if (ch === "%") {
      const triplet = template.slice(i, i + 3);
      if (!/^%[0-9A-Fa-f]{2}$/.test(triplet)) return "a % that starts no triplet";
      literal += triplet;
      i += 3;
    } else {
      if (!LITERAL.test(ch)) return "a character RFC 6570 does not allow in a literal";
      literal += ch;
      i++;
    }
  }
  if (literal) parts.push(literal);
  return parts;
}

/** The automaton of `parts` in `b`, or null as soon as it has more than `maxStates` states. */
function assemble(
  b: Builder,
  parts: readonly Part[],
  maxStates: number,
): { start: number; accept: number } | null {
  const start = b.state();
  let at = start;
  for (const part of parts) {
    // Every fragment's end is without an edge, so the next one starts at it.
    [, at] = typeof part === "string" ? b.literal(part, at) : b.expression(part.op, part.names, at);
    if (b.states > maxStates) return null;
  }
  return { start, accept: at };
}

/**
 * What a template string is: a template, parsed; none (why, for a log line); or a template of
 * `states` states, within {@link MAX_TEMPLATE_STATES} but past the room the caller had, not built.
 */
export type TemplateOutcome =
  | { readonly parsed: UriTemplate }
  | { readonly refused: string }
  | { readonly states: number };

/**
 * `template` parsed, when it is a level 1–3 template made of printable ASCII within
 * {@link MAX_TEMPLATE_CHARS} whose automaton has at most {@link MAX_TEMPLATE_STATES} states, and
 * at most `room` (default: that bound). It is refused when it has an unclosed or nested brace, a
 * stray `}`, an operator RFC 6570 reserves (`=`, `,`, `!`, `@`, `|`), a level-4 modifier, a bad
 * variable name, a literal character RFC 6570 does not allow, a `%` that starts no triplet, or
 * too many states. Anything outside printable ASCII is refused rather than encoded: it would show
 * an agent hidden characters, and every template can be written without it. The states are
 * counted before any is built; the work is linear in the template's length either way.
 */
export function compileUriTemplate(template: string, room = MAX_TEMPLATE_STATES): TemplateOutcome {
  const parts = partsOf(template);
  if (typeof parts === "string") return { refused: parts };
  const count = new Builder(null);
  if (!assemble(count, parts, MAX_TEMPLATE_STATES))
    return { refused: `more than ${MAX_TEMPLATE_STATES} states` };
  const n = count.states;
  const m = count.moves;
  if (n > room) return { states: n };
  const IndexArray = Math.max(n, m) < 0xffff ? Uint16Array : Uint32Array;
  const out: Out = {
    kind: new Uint8Array(n),
    code: new Uint8Array(n),
    next: new IndexArray(n),
    from: new IndexArray(m),
    to: new IndexArray(m),
  };
  const { start, accept } = assemble(new Builder(out), parts, n) ?? { start: 0, accept: 0 };
  // The empty moves grouped by the state they leave (a counting sort): one offset per state.
  const epsStart = new IndexArray(n + 1);
  for (let e = 0; e < m; e++) {
    const s = (out.from[e] ?? 0) + 1;
    epsStart[s] = (epsStart[s] ?? 0) + 1;
  }
  for (let s = 0; s < n; s++) epsStart[s + 1] = (epsStart[s + 1] ?? 0) + (epsStart[s] ?? 0);
  const fill = epsStart.slice(0, n);
  const epsTo = new IndexArray(m);
  for (let e = 0; e < m; e++) {
    const s = out.from[e] ?? 0;
    const at = fill[s] ?? 0;
    epsTo[at] = out.to[e] ?? 0;
    fill[s] = at + 1;
  }
  const { kind, code, next } = out;
  return { parsed: { template, nfa: { kind, code, next, epsStart, epsTo, start, accept } } };
}

/** `template` parsed, or null when it is none ({@link compileUriTemplate}'s rules). */
export function parseUriTemplate(template: string): UriTemplate | null {
  const outcome = compileUriTemplate(template);
  return "parsed" in outcome ? outcome.parsed : null;
}

/** Work a match may do: states visited and empty moves followed, summed over the URI's characters. */
export interface MatchBudget {
  steps: number;
}

/**
 * Whether `uri` is an expansion of `t` (see the top of this file). Each state visited, and each
 * empty move followed from it, costs `budget` one step, so the steps are the match's work; when
 * they run out (checked after each character: by at most the template's size more) the answer is
 * false and `budget.steps` is negative, so a caller matching many templates can tell "no" from
 * "gave up".
 */
export function matchesUriTemplate(t: UriTemplate, uri: string, budget: MatchBudget): boolean {
  const { kind, code, next, epsStart, epsTo, start, accept } = t.nfa;
  const n = kind.length;
  // The round (0 before the first character, i + 1 after the i-th) each state was last reached in.
  const seen = new Int32Array(n).fill(-1);
  const stack = new Uint32Array(n);
  let current = new Uint32Array(n);
  let following = new Uint32Array(n);
  let size = 0;
  let steps = budget.steps;
  /** Puts into `following` every state `from` reaches by empty moves, each once per round. */
  const close = (from: number, round: number) => {
    if (seen[from] === round) return;
    seen[from] = round;
    let top = 0;
    stack[top++] = from;
    while (top > 0) {
      const s = stack[--top] ?? 0;
      following[size++] = s;
      const first = epsStart[s] ?? 0;
      const last = epsStart[s + 1] ?? 0;
      steps -= 1 + last - first;
      for (let e = first; e < last; e++) {
        const to = epsTo[e] ?? 0;
        if (seen[to] === round) continue;
        seen[to] = round;
        stack[top++] = to;
      }
    }
  };
  close(start, 0);
  for (let i = 0; i < uri.length && steps >= 0; i++) {
    const c = uri.charCodeAt(i);
    // An expansion is ASCII: its values are percent-encoded, its literals checked above.
    if (c >= 128) {
      size = 0;
      break;
    }
    [current, following] = [following, current];
    const alive = size;
    size = 0;
    const bits = CLASS_BITS[c] ?? 0;
    for (let j = 0; j < alive; j++) {
      const s = current[j] ?? 0;
      const k = kind[s] ?? Edge.None;
      if (k === Edge.None) continue;
      if (k === Edge.Char ? code[s] === c : (bits & (1 << k)) !== 0) close(next[s] ?? 0, i + 1);
    }
    if (size === 0) break;
  }
  budget.steps = steps;
  return steps >= 0 && seen[accept] === uri.length;
}
