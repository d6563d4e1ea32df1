/**
 * RFC 6570 templates of levels 1–3 are parsed strictly and matched exactly: a URI matches when
 * some string values expand the template to it, and nothing else does.
 */
import { UriTemplate as SdkUriTemplate } from "@modelcontextprotocol/sdk/shared/uriTemplate.js";
import { describe, expect, it } from "vitest";
import { expandTemplate } from "./template-fixtures";
import {
  Edge,
  MAX_TEMPLATE_CHARS,
  MAX_TEMPLATE_STATES,
  matchesUriTemplate,
  parseUriTemplate,
  type UriTemplate,
} from "./uri-template";

function matches(template: string, uri: string): boolean {
  const t = parseUriTemplate(template);
  if (!t) throw new Error(`not a template: ${template}`);
  return matchesUriTemplate(t, uri, { steps: 10_000_000 });
}

/** RFC 6570 §1.2's variables (strings only: lists and maps are not values here). */
const RFC_VARS = {
  var: "value",
  hello: "Hello World!",
  path: "/foo/bar",
  empty: "",
  x: "1024",
  y: "768",
};

describe("RFC 6570 levels 1–3", () => {
  // RFC 6570 §1.2's examples of levels 1 to 3, with the expansions it gives.
  it.each([
    ["{var}", "value"],
    ["{hello}", "Hello%20World%21"],
    ["{+var}", "value"],
    ["{+hello}", "Hello%20World!"],
    ["{+path}/here", "/foo/bar/here"],
    ["here?ref={+path}", "here?ref=/foo/bar"],
    ["X{#var}", "X#value"],
    ["X{#hello}", "X#Hello%20World!"],
    ["map?{x,y}", "map?1024,768"],
    ["{x,hello,y}", "1024,Hello%20World%21,768"],
    ["{+x,hello,y}", "1024,Hello%20World!,768"],
    ["{+path,x}/here", "/foo/bar,1024/here"],
    ["{#x,hello,y}", "#1024,Hello%20World!,768"],
    ["{#path,x}/here", "#/foo/bar,1024/here"],
    ["X{.var}", "X.value"],
    ["X{.x,y}", "X.1024.768"],
    ["{/var}", "/value"],
    ["{/var,x}/here", "/value/1024/here"],
    ["{;x,y}", ";x=1024;y=768"],
    ["{;x,y,empty}", ";x=1024;y=768;empty"],
    ["{?x,y}", "?x=1024&y=768"],
    ["{?x,y,empty}", "?x=1024&y=768&empty="],
    ["?fixed=yes{&x}", "?fixed=yes&x=1024"],
    ["{&x,y,empty}", "&x=1024&y=768&empty="],
  ])("%s matches %s, and the reference expander agrees", (template, uri) => {
    expect(expandTemplate(template, RFC_VARS)).toBe(uri);
    expect(matches(template, uri)).toBe(true);
  });

  it("undefined variables expand to nothing, and that matches", () => {
    for (const template of ["{undef}", "{?undef}", "{#undef}", "{/a,b}", "{;a}"])
      expect(matches(template, ""), template).toBe(true);
    expect(matches("X{.undef}", "X")).toBe(true);
    expect(matches("a{?q,lang}", "a?lang=en")).toBe(true);
  });

  it("every expansion of the forms servers use, with tricky values, matches its template", () => {
    const templates = [
      "note://notes/{name}",
      "file:///srv/{+path}",
      "search://docs{?q,lang}",
      "tile://map{/z,x,y}.png",
      "matrix://m{;a,b}",
      "doc://book/{+chapter}{#section}",
      "x://{a,b}/{.ext}{&page}",
    ];
    const values = [
      "",
      "a b",
      "/",
      "a/b",
      "..",
      "%",
      "%41",
      "%zz",
      "ü",
      "a,b",
      "?x=1#y",
      "{}",
      "\u202E",
      "😀",
    ];
    for (const template of templates)
      for (const v of values)
        for (const vars of [
          {
            name: v,
            path: v,
            q: v,
            lang: "en",
            z: v,
            x: "1",
            y: v,
            a: v,
            b: "2",
            chapter: v,
            section: v,
            ext: v,
            page: v,
          },
          {
            name: v,
            path: v,
            q: undefined,
            lang: v,
            z: "3",
            x: undefined,
            y: v,
            a: undefined,
            b: v,
            chapter: v,
            section: undefined,
            ext: undefined,
            page: undefined,
          },
        ]) {
          const uri = expandTemplate(template, vars);
          expect(matches(template, uri), `${template} ← ${JSON.stringify(vars)} = ${uri}`).toBe(true);
        }
  });

  it.each([
    // A value of {name} is unreserved characters and triplets: no slash, space, query or fragment.
    ["note://notes/{name}", "note://notes/a/b"],
    ["note://notes/{name}", "note://notes/a b"],
    ["note://notes/{name}", "note://notes/a?x=1"],
    ["note://notes/{name}", "note://notes/a#f"],
    ["note://notes/{name}", "note://notes/a,b"],
    ["note://notes/{name}", "note://notes/%zz"],
    ["note://notes/{name}", "note://notes/%4"],
    ["note://notes/{name}", "note://notes/ü"],
    ["note://notes/{name}", "NOTE://notes/a"],
    ["note://notes/{name}", "note://notes"],
    // {+path} keeps reserved characters, never a space, a brace, a backslash or a bare %.
    ["file:///srv/{+path}", "file:///srv/a b"],
    ["file:///srv/{+path}", "file:///srv/a{b}"],
    ["file:///srv/{+path}", "file:///srv/a\\b"],
    ["file:///srv/{+path}", "file:///srv/50%"],
    ["file:///srv/{+path}", 'file:///srv/a"b'],
    ["file:///srv/{+path}", "file:///etc/passwd"],
    // Named values in the template's order, each once, each with its `=`.
    ["search://docs{?q,lang}", "search://docs?lang=en&q=x"],
    ["search://docs{?q,lang}", "search://docs?q=x&q=y"],
    ["search://docs{?q,lang}", "search://docs?q"],
    ["search://docs{?q,lang}", "search://docs?q=x&r=y"],
    ["search://docs{?q,lang}", "search://docs?q=a b"],
    ["search://docs{?q,lang}", "search://docs?q=a&b"],
    ["search://docs{?q,lang}", "search://docs?"],
    // At most as many segments as variables.
    ["tile://map{/z,x,y}.png", "tile://map/1/2/3/4.png"],
    ["tile://map{/z,x,y}.png", "tile://map/1//.png/"],
    // `;name` for an empty value, `;name=value` otherwise; never `;name=`.
    ["matrix://m{;a,b}", "matrix://m;a="],
    ["matrix://m{;a,b}", "matrix://m;b;a"],
    ["matrix://m{;a,b}", "matrix://m;c=1"],
    ["doc://book/{+chapter}{#section}", "doc://book/a b#s"],
  ])("%s does not match %s", (template, uri) => {
    expect(matches(template, uri)).toBe(false);
  });

  it("percent-encoded values may use either case of hex digits; literals are matched as written", () => {
    expect(matches("note://notes/{name}", "note://notes/a%2Fb")).toBe(true);
    expect(matches("note://notes/{name}", "note://notes/a%2fb")).toBe(true);
    expect(matches("note://%41/{name}", "note://%41/x")).toBe(true);
    expect(matches("note://%41/{name}", "note://A/x")).toBe(false);
  });

  it("is stricter than the v1 SDK's UriTemplate.match, which takes {+path} for any characters at all", () => {
    const sdk = new SdkUriTemplate("file:///srv/{+path}");
    for (const uri of ["file:///srv/a b", "file:///srv/a{b}", "file:///srv/50%"]) {
      expect(sdk.match(uri), uri).not.toBeNull();
      expect(matches("file:///srv/{+path}", uri), uri).toBe(false);
    }
  });
});

describe("what is no template", () => {
  it.each([
    ["an unclosed brace", "bad://{unclosed"],
    ["a nested brace", "bad://{a{b}}"],
    ["a stray closing brace", "bad://a}"],
    ["an empty expression", "bad://{}"],
    ["an operator RFC 6570 reserves", "bad://{=a}"],
    ["another reserved operator", "bad://{!a}"],
    ["a level-4 explode", "wild://{path*}"],
    ["a level-4 prefix", "wild://{path:3}"],
    ["a space in a variable name", "bad://{a b}"],
    ["an empty variable name", "bad://{a,,b}"],
    ["a space", "bad://a b/{x}"],
    ["a quote", "bad://a'b/{x}"],
    ["a backslash", "bad://a\\b/{x}"],
    ["a bare percent", "bad://50%/{x}"],
    ["a zero-width space", "hidden://x/\u200B{id}"],
    ["a non-ASCII letter", "demo://ü/{x}"],
    ["a control character", "bad://a\u0007/{x}"],
    ["the empty string", ""],
    ["one too long", `x://${"a".repeat(MAX_TEMPLATE_CHARS)}{x}`],
    // Within the length bound, but its automaton would have more than MAX_TEMPLATE_STATES states.
    ["one too large", `x://${`{;${"abcdefghijklmnop".split("").join(",")}}`.repeat(29)}`],
    [
      "too many variables in one expression",
      `x://{${Array.from({ length: 17 }, (_, i) => `v${i}`).join(",")}}`,
    ],
  ])("%s", (_, template) => {
    expect(parseUriTemplate(template)).toBeNull();
  });

  it("a template without expressions is one URI", () => {
    expect(matches("static://a/b", "static://a/b")).toBe(true);
    expect(matches("static://a/b", "static://a/bc")).toBe(false);
  });
});

describe("the cost of a match", () => {
  it("a template built to make a backtracking matcher explode is matched within its budget", () => {
    const hostile = parseUriTemplate(`x://${"{a}".repeat(300)}!`);
    if (!hostile) throw new Error("not parsed");
    const uri = `x://${"a".repeat(2000)}`;
    const budget = { steps: 10_000_000 };
    expect(matchesUriTemplate(hostile, uri, budget)).toBe(false);
    expect(budget.steps).toBeGreaterThanOrEqual(0);
    const small = { steps: 1000 };
    expect(matchesUriTemplate(hostile, uri, small)).toBe(false);
    expect(small.steps).toBeLessThan(0);
  });

  it("a match's steps are the states it visits and the empty moves it follows, character by character", () => {
    const cases: [string, string][] = [
      ["note://notes/{name}", "note://notes/a%20b"],
      ["note://notes/{name}", "note://notes/a/b"],
      ["search://docs{?q,lang}", "search://docs?q=x&lang=en"],
      ["matrix://m{;a,b}", "matrix://m;a;b=1"],
      ["{+path,x}/here", "/foo/bar,1024/here"],
      [`x://${"{a,b,c,d}".repeat(20)}`, `x://${"a,".repeat(200)}`],
      [`x://${"{;a,b,c,d}".repeat(10)}`, `x://${";a=1;b;c=%41".repeat(30)}ü`],
      ["{+uri}", ""],
    ];
    for (const [template, uri] of cases) {
      const t = parseUriTemplate(template);
      if (!t) throw new Error(`not a template: ${template}`);
      const budget = { steps: 10_000_000 };
      matchesUriTemplate(t, uri, budget);
      expect(10_000_000 - budget.steps, `${template} ${uri}`).toBe(work(t, uri));
    }
  });

  it(`a template's automaton has at most ${MAX_TEMPLATE_STATES} states`, () => {
    const sixteen = `{;${"abcdefghijklmnop".split("").join(",")}}`;
    let template = "x://";
    while (parseUriTemplate(template + sixteen)) template += sixteen;
    expect(parseUriTemplate(template)?.nfa.kind.length).toBeLessThanOrEqual(MAX_TEMPLATE_STATES);
    expect((template + sixteen).length).toBeLessThanOrEqual(MAX_TEMPLATE_CHARS);
  });
});

/**
 * The work of matching `uri` against `t`, counted apart from the matcher: in each round (before
 * the first character, then after each), every state reached by empty moves once, and every
 * empty move leaving it. The classes are RFC 3986's, written out again here.
 */
function work(t: UriTemplate, uri: string): number {
  const { kind, code, next, epsStart, epsTo, start } = t.nfa;
  const takes = (s: number, ch: string): boolean => {
    switch (kind[s]) {
      case Edge.Char:
        return code[s] === ch.charCodeAt(0);
      case Edge.Unreserved:
        return /^[A-Za-z0-9\-._~]$/.test(ch);
      case Edge.UnreservedOrReserved:
        return /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]$/.test(ch);
      case Edge.Hex:
        return /^[0-9A-Fa-f]$/.test(ch);
      default:
        return false;
    }
  };
  let total = 0;
  const closure = (seeds: number[]): Set<number> => {
    const reached = new Set<number>();
    const todo = [...seeds];
    while (todo.length > 0) {
      const s = todo.pop() ?? 0;
      if (reached.has(s)) continue;
      reached.add(s);
      const from = epsStart[s] ?? 0;
      const to = epsStart[s + 1] ?? 0;
      total += 1 + to - from;
      for (let e = from; e < to; e++) todo.push(epsTo[e] ?? 0);
    }
    return reached;
  };
  let alive = closure([start]);
  for (const ch of uri) {
    if (alive.size === 0) break;
    alive = closure([...alive].filter((s) => takes(s, ch)).map((s) => next[s] ?? 0));
  }
  return total;
}
