/**
 * The import directions of docs/ARCHITECTURE.md, checked on the source itself. Biome's
 * `noRestrictedImports` rules (biome.json) refuse single forbidden edges as they are written;
 * this test adds what a per-file rule cannot see: cycles between the rooms of server/, and what
 * the code that runs in production may import from npm. Imports are found by the TypeScript
 * parser (test/support/imports.ts), so a comment or a string is never taken for one, and every
 * form counts: static, `export … from`, type-only, `import()`, `require`, `createRequire`, and
 * the code a worker evaluates from a string.
 */
import { readdirSync, readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { constantText, type FileImports, findImports } from "./support/imports";

const root = path.resolve(__dirname, "..");

/** A code file: TypeScript or JavaScript, modules or scripts, with or without JSX. */
const CODE = /\.(tsx?|mts|cts|jsx?|mjs|cjs)$/;
/** Type declarations: nothing of theirs runs, and biome and tsc look after them. */
const DECLARATION = /\.d\.[cm]?ts$/;

/** Code files under `dir` (TypeScript and JavaScript modules, no declaration files). */
function codeFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return codeFiles(p);
    return CODE.test(e.name) && !DECLARATION.test(e.name) ? [p] : [];
  });
}

/** The code files under `dir` but its tests. */
function sourceFiles(dir: string): string[] {
  return codeFiles(dir).filter((f) => !/\.test\.[cm]?[jt]sx?$/.test(f));
}

/** A file's room: its top-level folder, or under server/ its folder or top-level module. */
function roomOf(file: string): string {
  const parts = path.relative(root, file).split(path.sep);
  if (parts[0] !== "server") return parts[0] ?? "";
  const second = parts[1] ?? "";
  return parts.length > 2
    ? `server/${second}`
    : `server/${second.replace(/\.(tsx?|mts|cts|jsx?|mjs|cjs|json)$/, "")}`;
}

/** The text of `file`, or undefined when there is no such file (or it is a folder). */
function readIfThere(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** A local specifier of `file` as the file it names, or null for a package. */
function localTarget(file: string, spec: string): string | null {
  let target: string;
  if (spec.startsWith("@/")) target = path.join(root, spec.slice(2));
  else if (spec.startsWith(".")) target = path.resolve(path.dirname(file), spec);
  else return null;
  // An existing file first (`./x.mjs`, `./data.json`), then what TypeScript would try, `./x.js`
  // naming `x.ts` included.
  const candidates = [
    target,
    `${target}.ts`,
    `${target}.tsx`,
    path.join(target, "index.ts"),
    path.join(target, "index.tsx"),
  ];
  if (/\.[cm]?jsx?$/.test(target)) candidates.push(target.replace(/js(x?)$/, "ts$1"));
  for (const candidate of candidates) if (readIfThere(candidate) !== undefined) return candidate;
  return /\.[a-z]+$/.test(target) ? target : `${target}.ts`;
}

const parsed = new Map<string, FileImports>();

/**
 * What `file` imports, as test/support/imports.ts finds it, with the imports of the code its
 * workers evaluate from a string counted as its own (at the line that starts the worker): that
 * code runs in production as much as the file does. A worker whose code cannot be found is a
 * computed load.
 */
function importsOf(file: string): FileImports {
  const known = parsed.get(file);
  if (known) return known;
  const own = findImports(file, readFileSync(file, "utf8"));
  const found: FileImports = { modules: [...own.modules], computed: [...own.computed], workers: own.workers };
  for (const worker of own.workers) {
    let code: string | undefined;
    if (worker.source && "text" in worker.source) code = worker.source.text;
    else if (worker.source) {
      const target = localTarget(file, worker.source.specifier);
      const text = target === null ? undefined : readIfThere(target);
      if (target && text !== undefined) code = constantText(target, text, worker.source.name);
    }
    if (code === undefined) {
      found.computed.push({ kind: "worker", line: worker.line, expression: worker.expression });
      continue;
    }
    // Worker code given as a string runs as CommonJS.
    const inner = findImports(`${file}.worker.cjs`, code);
    found.modules.push(...inner.modules.map((m) => ({ ...m, line: worker.line })));
    found.computed.push(...inner.computed.map((c) => ({ ...c, line: worker.line })));
  }
  parsed.set(file, found);
  return found;
}

/** Every module `file` imports (static, dynamic and type-only alike), as written. */
function specifiers(file: string): string[] {
  return importsOf(file).modules.map((m) => m.specifier);
}

/** Room → rooms it imports (static, dynamic and type-only imports alike), with one example file each. */
function roomGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of ["server", "lib", "components", "app"].flatMap((d) => sourceFiles(path.join(root, d)))) {
    for (const spec of specifiers(file)) {
      const target = localTarget(file, spec);
      if (target === null) continue;
      const from = roomOf(file);
      const to = roomOf(target);
      if (from === to) continue;
      const edges = graph.get(from) ?? new Map<string, string>();
      graph.set(from, edges);
      if (!edges.has(to)) edges.set(to, path.relative(root, file));
    }
  }
  return graph;
}

/** Every cycle's rooms, each found once (from its first room in iteration order). */
function cyclesOf(graph: Map<string, Iterable<string>>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return cycles;
}

function importers(
  graph: Map<string, Map<string, string>>,
  from: (r: string) => boolean,
  to: (r: string) => boolean,
) {
  const found: string[] = [];
  for (const [a, edges] of graph) {
    if (!from(a)) continue;
    for (const [b, file] of edges) if (to(b)) found.push(`${file} (${a} → ${b})`);
  }
  return found;
}

describe("the rooms and their arrows", () => {
  const graph = roomGraph();
  const serverOnly = new Map(
    [...graph]
      .filter(([room]) => room.startsWith("server/"))
      .map(([room, edges]) => [room, [...edges.keys()].filter((r) => r.startsWith("server/"))]),
  );

  it("the cycle finder finds a cycle between rooms, and none in a chain", () => {
    expect(
      cyclesOf(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", ["a"]],
        ]),
      ),
    ).toEqual([["a", "b", "c", "a"]]);
    expect(
      cyclesOf(
        new Map([
          ["a", ["b"]],
          ["b", ["c"]],
          ["c", []],
        ]),
      ),
    ).toEqual([]);
  });

  it("no two rooms of server/ import each other, directly or around a cycle", () => {
    expect(cyclesOf(serverOnly)).toEqual([]);
  });

  it("server/ imports neither app/ nor components/", () => {
    const bad = importers(
      graph,
      (r) => r.startsWith("server/"),
      (r) => r === "app" || r === "components",
    );
    expect(bad).toEqual([]);
  });

  it("components/ and lib/ never import server/", () => {
    const bad = importers(
      graph,
      (r) => r === "components" || r === "lib",
      (r) => r.startsWith("server/"),
    );
    expect(bad).toEqual([]);
  });

  it("server/mcp and server/net never touch the store", () => {
    const bad = importers(
      graph,
      (r) => r === "server/mcp" || r === "server/net",
      (r) => r === "server/store",
    );
    expect(bad).toEqual([]);
  });

  it("only the edge, boot, the CLI and the production server reach for the runtime", () => {
    const allowed = new Set(["server/http", "server/boot", "server/main", "server/cli", "app"]);
    const bad = importers(
      graph,
      (r) => !allowed.has(r),
      (r) => r === "server/runtime",
    );
    expect(bad).toEqual([]);
  });
});

/** The most lines a file of server/ may have: past it, a module holds more than one idea. */
const MAX_SERVER_FILE_LINES = 450;

/** Every file of server/ (tests and fixtures too) with more than `max` lines, as `path: N lines`. */
function overlongFiles(max: number): string[] {
  return codeFiles(path.join(root, "server"))
    .map((f) => ({ f, lines: readFileSync(f, "utf8").split("\n").length - 1 }))
    .filter(({ lines }) => lines > max)
    .map(({ f, lines }) => `${path.relative(root, f)}: ${lines} lines`);
}

/** File → the local files it imports (static, dynamic and type-only alike), for the code files of server/. */
function serverFileGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of codeFiles(path.join(root, "server"))) {
    const targets = specifiers(file)
      .map((spec) => localTarget(file, spec))
      .filter((t): t is string => t !== null && CODE.test(t));
    graph.set(
      path.relative(root, file),
      [...new Set(targets)].map((t) => path.relative(root, t)),
    );
  }
  return graph;
}

describe("the files of server/", () => {
  it(`no file of server/ is longer than ${MAX_SERVER_FILE_LINES} lines`, () => {
    expect(overlongFiles(MAX_SERVER_FILE_LINES)).toEqual([]);
  });

  it("the length check names a file over the bound", () => {
    const longest = Math.max(
      ...codeFiles(path.join(root, "server")).map((f) => readFileSync(f, "utf8").split("\n").length - 1),
    );
    expect(overlongFiles(longest - 1).length).toBeGreaterThan(0);
  });

  it("no two files of server/ import each other, directly or around a cycle", () => {
    expect(cyclesOf(serverFileGraph())).toEqual([]);
  });
});

/** drizzle's executors of SQLite alone, on a query builder: PostgreSQL's drizzle has none of them. */
const SQLITE_EXECUTORS = new Set(["get", "all", "run"]);

/** A call's text on one line; a long one as its start and its end. */
function shortCall(text: string): string {
  const call = text.replace(/\s+/g, " ");
  return call.length > 90 ? `${call.slice(0, 40)} … ${call.slice(-40)}` : call;
}

/**
 * `line: call` for every call in `text` that works on SQLite only: `.get()`, `.all()` or `.run()`
 * with empty parentheses (drizzle's SQLite executors; awaiting the builder, `first()` or
 * `.execute()` work on both stores), and `.transaction(` on anything (a db's own transactions;
 * `transaction()` of server/store/db.ts is one for both stores, retried on PostgreSQL). Found by
 * the parser, so a comment or a string is none. Allowed: a better-sqlite3 statement, whose
 * `prepare` is given its SQL (`sqliteOf(db)?.prepare("PRAGMA …").get()`, a SQLite-only look at
 * the file); drizzle's own `prepare()` takes none.
 */
function sqliteOnlyCalls(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const name = node.expression.name.text;
      const receiver = node.expression.expression;
      const rawStatement =
        ts.isCallExpression(receiver) &&
        ts.isPropertyAccessExpression(receiver.expression) &&
        receiver.expression.name.text === "prepare" &&
        receiver.arguments.length > 0;
      if (
        name === "transaction" ||
        (SQLITE_EXECUTORS.has(name) && node.arguments.length === 0 && !rawStatement)
      ) {
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        found.push(`${line + 1}: ${shortCall(node.getText(source))}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Calls the finder takes for the store's that are not (`file: call`, without the line), each
 * with what it is: a method of Gatehouse's own that happens to share a name and takes nothing.
 */
const NOT_THE_STORE = new Map<string, string>([
  [
    "server/agent-mcp/endpoint.ts: this.sessions.all()",
    "the /mcp sessions in memory (agent-mcp/sessions.ts)",
  ],
  ["server/agent-mcp/sessions.ts: this.all()", "the /mcp sessions in memory, from inside"],
  ["server/mcp/transports.ts: deps.agent.get()", "the outbound HTTP agent, made on first use"],
  ["server/mcp/refresh-pacing.ts: this.opts.run()", "the paced re-list the pacer was given"],
]);

/** `file:line: call` for every SQLite-only call in server/ and app/ (tests too), but in server/store/. */
function sqliteOnlyCallsOutsideStore(): { file: string; line: string; call: string }[] {
  const store = path.join(root, "server", "store") + path.sep;
  return ["server", "app"]
    .flatMap((d) => codeFiles(path.join(root, d)))
    .filter((f) => !f.startsWith(store))
    .flatMap((f) =>
      sqliteOnlyCalls(f, readFileSync(f, "utf8")).map((c) => {
        const [line = "", call = ""] = c.split(/: (.*)/s);
        return { file: path.relative(root, f), line, call };
      }),
    );
}

describe("the store's statements", () => {
  it("the finder names SQLite's executors and a db's transaction, and no better-sqlite3 statement, comment or string", () => {
    const text = [
      "const a = db.select().from(users).where(eq(users.id, 1)).get();",
      "const b = db.select().from(users).all();",
      "db.update(users).set({ name: 'x' }).run();",
      "const c = db.select().from(users).prepare().get();",
      "db.transaction((tx) => tx.insert(users).values(v).run());",
      "this.deps.db.transaction(() => 1);",
      'sqliteOf(db)?.prepare("SELECT count(*) AS n FROM users").get();',
      'other.prepare("BEGIN IMMEDIATE").run();',
      "const d = await first(db.select().from(users));",
      "await transaction(db, async (tx) => { await tx.insert(users).values(v); });",
      "const e = await stmt.execute({ id });",
      "const f = map.get(key); await Promise.all(list);",
      "// db.select().from(users).get() in a comment",
      'const g = "db.transaction(fn) and .run() in a string";',
    ].join("\n");
    expect(sqliteOnlyCalls("a.ts", text)).toEqual([
      "1: db.select().from(users).where(eq(users.id, 1)).get()",
      "2: db.select().from(users).all()",
      "3: db.update(users).set({ name: 'x' }).run()",
      "4: db.select().from(users).prepare().get()",
      "5: db.transaction((tx) => tx.insert(users).values(v).run())",
      "5: tx.insert(users).values(v).run()",
      "6: this.deps.db.transaction(() => 1)",
    ]);
  });

  it("no file of server/ or app/ but the store's own calls .get(), .all(), .run() or .transaction( (SQLite only)", () => {
    const calls = sqliteOnlyCallsOutsideStore();
    const allowed = (c: { file: string; call: string }) => NOT_THE_STORE.has(`${c.file}: ${c.call}`);
    expect(calls.filter((c) => !allowed(c)).map((c) => `${c.file}:${c.line}: ${c.call}`)).toEqual([]);
    // A listed call that is gone leaves a reason for nothing: drop it.
    const seen = new Set(calls.map((c) => `${c.file}: ${c.call}`));
    expect([...NOT_THE_STORE.keys()].filter((k) => !seen.has(k))).toEqual([]);
  });
});

/** Test files and the helpers tests share beside them (`*-fixtures.ts`, `test-helpers.ts`). */
const TEST_ONLY = /(\.test\.[cm]?[jt]sx?|-fixtures\.ts|(^|\/)test-helpers\.ts)$/;

/**
 * What runs in production: server/, app/, components/, lib/ and demo/ (the demo server `npm start`
 * configures) but their tests and test helpers; `npm start` (scripts/start.mjs) and what it runs
 * (the server bundle's command, the bundler), the files Next.js loads itself; and every local
 * module any of them imports, wherever it lives.
 */
function productionFiles(): string[] {
  const roots = [
    ...["server", "app", "components", "lib", "demo"].flatMap((d) => codeFiles(path.join(root, d))),
    ...["scripts/start.mjs", "scripts/server-command.mjs", "scripts/build-server.mjs"],
    ...["instrumentation.ts", "next.config.mjs", "postcss.config.mjs"],
  ]
    .map((f) => path.resolve(root, f))
    .filter((f) => !TEST_ONLY.test(path.relative(root, f)));
  const seen = new Set(roots);
  const queue = [...roots];
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    for (const spec of specifiers(file)) {
      const target = localTarget(file, spec);
      if (target && !seen.has(target) && CODE.test(target) && !DECLARATION.test(target)) {
        seen.add(target);
        queue.push(target);
      }
    }
  }
  return [...seen].sort();
}

/** The npm package a bare specifier names (`@scope/name/sub` → `@scope/name`), or null for a built-in. */
function packageOf(spec: string): string | null {
  if (spec.startsWith("node:") || isBuiltin(spec)) return null;
  const parts = spec.split("/");
  return spec.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? spec);
}

/**
 * Production loads whose module is computed at run time, each with why it may be: `file:
 * expression` as the finder reports it (`import(pathToFileURL(entry).href)` → the argument). A
 * load listed here is seen by no rule of this file, so the reason says what keeps it in bounds.
 */
const COMPUTED_ALLOWED = new Map<string, string>([]);

/** `file: kind expression` for every production load the finder could not name. */
function computedLoads(): string[] {
  return productionFiles().flatMap((file) =>
    importsOf(file).computed.map((c) => `${path.relative(root, file)}: ${c.kind} ${c.expression}`),
  );
}

/** `[file, package]` for every npm package a production file imports. */
function productionImports(): [string, string][] {
  return productionFiles().flatMap((file) =>
    specifiers(file)
      .filter((spec) => localTarget(file, spec) === null)
      .map((spec) => packageOf(spec))
      .filter((pkg): pkg is string => pkg !== null)
      .map((pkg): [string, string] => [path.relative(root, file), pkg]),
  );
}

describe("what runs in production", () => {
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
  };
  const imports = productionImports();

  it("the file list holds the server, the pages, the demo server and npm start, and no test", () => {
    const files = new Set(imports.map(([file]) => file));
    for (const f of [
      "server/main.ts",
      "server/agent-mcp/endpoint.ts",
      // The store on either kind: the rules above see its new files as any other of server/.
      "server/store/pg-driver.ts",
      "server/store/sqlite-driver.ts",
      "server/store/schema-pg.ts",
      "server/store/location.ts",
      "server/store/migrations.ts",
      "demo/server.mjs",
      "scripts/start.mjs",
    ]) {
      expect(productionFiles()).toContain(path.join(root, f));
    }
    expect([...files].filter((f) => TEST_ONLY.test(f))).toEqual([]);
  });

  it("a file of server/ that imports vitest is a test or a test helper by its name", () => {
    const unnamed = codeFiles(path.join(root, "server"))
      .filter((f) => specifiers(f).includes("vitest"))
      .map((f) => path.relative(root, f))
      .filter((f) => !TEST_ONLY.test(f));
    expect(unnamed).toEqual([]);
  });

  it("no production file imports the v1 SDK (@modelcontextprotocol/sdk): it is for tests, as a real v1 client and server", () => {
    const v1 = imports.filter(([, p]) => p === "@modelcontextprotocol/sdk").map(([file]) => file);
    expect([...new Set(v1)]).toEqual([]);
  });

  it("every npm package a production file imports is in dependencies, not only devDependencies", () => {
    const deps = new Set(Object.keys(pkg.dependencies ?? {}));
    const missing = imports.filter(([, p]) => !deps.has(p)).map(([file, p]) => `${p} (${file})`);
    expect([...new Set(missing)]).toEqual([]);
  });

  it("no production file loads a module by a computed name, but those listed with a reason", () => {
    const loads = computedLoads();
    expect(loads.filter((l) => !COMPUTED_ALLOWED.has(l))).toEqual([]);
    // A listed load that is gone leaves a reason for nothing: drop it.
    expect([...COMPUTED_ALLOWED.keys()].filter((l) => !loads.includes(l))).toEqual([]);
  });

  it("what a worker evaluates from a string counts as imports of the file that starts it", () => {
    // The argument checker's Ajv and the rule evaluator's CEL are loaded only inside worker code
    // held in a string (the latter's in another file): without it no rule would see them.
    expect(imports).toContainEqual(["server/calls/argument-checker.ts", "ajv"]);
    expect(imports).toContainEqual(["server/rules/evaluator.ts", "@bufbuild/cel"]);
    expect(imports).toContainEqual(["server/rules/evaluator.ts", "@bufbuild/re2"]);
  });
});

/** The specifiers `findImports` finds in `text`, as `kind specifier`. */
function found(fileName: string, text: string): string[] {
  return findImports(fileName, text).modules.map((m) => `${m.kind} ${m.specifier}`);
}

describe("the import finder", () => {
  it("sees an import whose list holds a comment with a semicolon", () => {
    const text = [
      "import type {",
      "  CallToolResult, // the result; as the SDK types it",
      '} from "@modelcontextprotocol/sdk/types.js";',
    ].join("\n");
    expect(found("links.ts", text)).toEqual(["import @modelcontextprotocol/sdk/types.js"]);
  });

  it("sees imports over several lines, default and namespace ones, side effects only, and import = require", () => {
    const text = [
      "import {",
      "  a,",
      "  b as c,",
      '} from "./multi";',
      "import def, {",
      "  type T,",
      "} from 'pkg-multi';",
      'import * as ns from "pkg-ns";',
      'import "server-only";',
      'import eq = require("pkg-eq");',
      'type R = import("pkg-type").R;',
    ].join("\n");
    expect(found("a.ts", text)).toEqual([
      "import ./multi",
      "import pkg-multi",
      "import pkg-ns",
      "import server-only",
      "import pkg-eq",
      "type pkg-type",
    ]);
  });

  it("sees every export … from", () => {
    const text = [
      'export * from "./all";',
      'export * as ns from "./ns";',
      "export {",
      "  x, // one; of them",
      '} from "./named";',
      'export type { T } from "./types";',
      "export const local = 1;",
    ].join("\n");
    expect(found("a.ts", text)).toEqual(["export ./all", "export ./ns", "export ./named", "export ./types"]);
  });

  it("sees dynamic imports of a string or a template literal without substitutions", () => {
    const text = [
      'await import("./plain");',
      "await import(`./template`);",
      "const m = () => import('pkg-lazy');",
    ].join("\n");
    expect(found("a.mjs", text)).toEqual(["dynamic ./plain", "dynamic ./template", "dynamic pkg-lazy"]);
  });

  it("sees require, createRequire called at once or through a name, and resolve", () => {
    const text = [
      'import { createRequire } from "node:module";',
      'import { createRequire as cr } from "module";',
      "const req = createRequire(import.meta.url);",
      'req("cjs-named");',
      'createRequire(import.meta.url)("cjs-at-once");',
      'cr(import.meta.url)("cjs-alias");',
      'req.resolve("cjs-resolved");',
      'import.meta.resolve("esm-resolved");',
      'const { createRequire: make } = require("node:module");',
      'const load = make(__dirname); load("cjs-destructured");',
      'require("cjs-plain");',
      'module.createRequire(base)("cjs-member");',
    ].join("\n");
    expect(found("a.js", text)).toEqual([
      "import node:module",
      "import module",
      "require cjs-named",
      "require cjs-at-once",
      "require cjs-alias",
      "resolve cjs-resolved",
      "resolve esm-resolved",
      "require node:module",
      "require cjs-destructured",
      "require cjs-plain",
      "require cjs-member",
    ]);
  });

  it("takes nothing in a comment, a string, a template, JSX text or JSDoc for an import", () => {
    const text = [
      '// import x from "in-line-comment";',
      '/* require("in-block-comment"); import("in-block-comment") */',
      "/** @type {import('in-jsdoc').T} */",
      "const s = 'import y from \"in-string\"';",
      'const t = `import("in-template"); require("in-template")`;',
      'const u = `${s} import z from "in-template-expression"`;',
      'export const view = <p>import w from "in-jsx"; require("in-jsx")</p>;',
      'const o = { import: "in-key", require: "in-value" };',
      'o.require("in-method");',
    ].join("\n");
    expect(found("a.tsx", text)).toEqual([]);
    expect(findImports("a.tsx", text).computed).toEqual([]);
  });

  it("reports a load of a computed name, which no rule could check", () => {
    const text = [
      "await import(name);",
      "await import(`./plugins/${name}.js`);",
      'await import("./" + name);',
      "require(path);",
      "createRequire(base)(pkg);",
    ].join("\n");
    const result = findImports("a.mjs", text);
    expect(result.modules).toEqual([]);
    expect(result.computed.map((c) => `${c.line} ${c.kind} ${c.expression}`)).toEqual([
      "1 dynamic name",
      "2 dynamic `./plugins/${name}.js`",
      '3 dynamic "./" + name',
      "4 require path",
      "5 require pkg",
    ]);
  });

  it("finds the code of a worker evaluated from a string, in the file or imported, and no other worker", () => {
    const text = [
      'import { SOURCE } from "./worker-source";',
      'const LOCAL = `const { createRequire } = require("node:module");',
      'createRequire(workerData.base)("in-worker");`;',
      "new Worker(LOCAL, { eval: true });",
      "new Worker(SOURCE, { eval: true });",
      'new Worker("./file.js");',
      "new Worker(make(), { eval: true });",
    ].join("\n");
    const workers = findImports("a.ts", text).workers;
    expect(workers.map((w) => w.source)).toEqual([
      {
        text: 'const { createRequire } = require("node:module");\ncreateRequire(workerData.base)("in-worker");',
      },
      { specifier: "./worker-source", name: "SOURCE" },
      null,
    ]);
    const local = workers[0]?.source;
    expect(local && "text" in local ? found("w.cjs", local.text) : []).toEqual([
      "require node:module",
      "require in-worker",
    ]);
    const module = 'export const SOURCE = `load("${"x"}"); require("from-constant")`;';
    expect(constantText("worker-source.ts", module, "SOURCE")).toBe('load("/**/"); require("from-constant")');
  });
});
