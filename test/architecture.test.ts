/**
 * The import directions of docs/ARCHITECTURE.md, checked on the source itself. Biome's
 * `noRestrictedImports` rules (biome.json) refuse single forbidden edges as they are written;
 * this test adds what a per-file rule cannot see: cycles between the rooms of server/, and what
 * the code that runs in production may import from npm.
 */
import { readdirSync, readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(__dirname, "..");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name) ? [p] : [];
  });
}

/** A file's room: its top-level folder, or under server/ its folder or top-level module. */
function roomOf(file: string): string {
  const parts = path.relative(root, file).split(path.sep);
  if (parts[0] !== "server") return parts[0] ?? "";
  const second = parts[1] ?? "";
  return parts.length > 2 ? `server/${second}` : `server/${second.replace(/\.(tsx?|json)$/, "")}`;
}

/** `import … from "x"`, `export … from "x"`, `import "x"` (side effects only), `import("x")`, `require("x")`. */
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|(?:^|\n)\s*import\s+["']([^"']+)["']|(?:import|require)\(\s*["']([^"']+)["']\s*\)/g;

/** Room → rooms it imports (static, dynamic and type-only imports alike), with one example file each. */
function roomGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of ["server", "lib", "components", "app"].flatMap((d) => sourceFiles(path.join(root, d)))) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? "";
      let target: string;
      if (spec.startsWith("@/")) target = path.join(root, spec.slice(2));
      else if (spec.startsWith(".")) target = path.resolve(path.dirname(file), spec);
      else continue;
      const from = roomOf(file);
      const to = roomOf(/\.[a-z]+$/.test(target) ? target : `${target}.ts`);
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

/** Test files and the helpers tests share beside them (`*-fixtures.ts`, `test-helpers.ts`). */
const TEST_ONLY = /(\.test\.tsx?|-fixtures\.ts|(^|\/)test-helpers\.ts)$/;

/** Code files under `dir` (TypeScript and JavaScript modules, no declaration files). */
function codeFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return codeFiles(p);
    return /\.(tsx?|mjs|js)$/.test(e.name) && !/\.d\.(ts|mts)$/.test(e.name) ? [p] : [];
  });
}

/** Every module `file` imports (static, dynamic and type-only alike), as written. */
function specifiers(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(IMPORT)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
}

/** A local specifier of `file` as the file it names, or null for a package. */
function localTarget(file: string, spec: string): string | null {
  let target: string;
  if (spec.startsWith("@/")) target = path.join(root, spec.slice(2));
  else if (spec.startsWith(".")) target = path.resolve(path.dirname(file), spec);
  else return null;
  if (/\.[a-z]+$/.test(target)) return target;
  for (const candidate of [`${target}.ts`, `${target}.tsx`, path.join(target, "index.ts")]) {
    try {
      readFileSync(candidate);
      return candidate;
    } catch {
      // Not this one; the next.
    }
  }
  return `${target}.ts`;
}

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
      if (target && !seen.has(target) && /\.(tsx?|mjs|js)$/.test(target)) {
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
});
