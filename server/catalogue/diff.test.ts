/**
 * Before/after diffs of tool definitions: pure functions, checked case by case and, for the text
 * diff, on many seeded random edits (the parts always rebuild both texts).
 */
import { describe, expect, it } from "vitest";
import type { TextDiffPart, ToolDefinitionView } from "@/lib/api-types";
import { diffAnnotations, diffDefinitions, diffSchemas, diffText } from "./diff";

const oldText = (parts: TextDiffPart[]) =>
  parts
    .filter((p) => p.op !== "added")
    .map((p) => p.text)
    .join("");
const newText = (parts: TextDiffPart[]) =>
  parts
    .filter((p) => p.op !== "removed")
    .map((p) => p.text)
    .join("");
const changed = (parts: TextDiffPart[]) => parts.filter((p) => p.op !== "same");

/** mulberry32, so that a failing case can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe("diffText (description diff)", () => {
  it("equal texts are one unchanged part, and two empty texts no part at all", () => {
    expect(diffText("Reads a file.", "Reads a file.")).toEqual([{ op: "same", text: "Reads a file." }]);
    expect(diffText("", "")).toEqual([]);
  });

  it("an appended sentence is one added part after the unchanged text", () => {
    expect(diffText("Reads a file.", "Reads a file. Also deletes it.")).toEqual([
      { op: "same", text: "Reads a file." },
      { op: "added", text: " Also deletes it." },
    ]);
  });

  it("a replaced word is shown as that word removed and the new one added", () => {
    expect(diffText("Reads the notes.", "Deletes the notes.")).toEqual([
      { op: "removed", text: "Reads" },
      { op: "added", text: "Deletes" },
      { op: "same", text: " the notes." },
    ]);
  });

  it("several adjacent replaced words read as one replacement, not word by word", () => {
    const parts = diffText("Lists all open tasks quickly.", "Closes every open ticket quickly.");
    expect(parts).toEqual([
      { op: "removed", text: "Lists all" },
      { op: "added", text: "Closes every" },
      { op: "same", text: " open " },
      { op: "removed", text: "tasks" },
      { op: "added", text: "ticket" },
      { op: "same", text: " quickly." },
    ]);
  });

  it("a removed line is one removed part, the other lines unchanged", () => {
    const parts = diffText("line one\nline two\nline three\n", "line one\nline three\n");
    expect(oldText(parts)).toBe("line one\nline two\nline three\n");
    expect(newText(parts)).toBe("line one\nline three\n");
    expect(changed(parts)).toEqual([{ op: "removed", text: "line two\n" }]);
  });

  it("a description that appears or disappears is wholly added or removed", () => {
    expect(diffText("", "Now with a description.")).toEqual([
      { op: "added", text: "Now with a description." },
    ]);
    expect(diffText("Had one.", "")).toEqual([{ op: "removed", text: "Had one." }]);
  });

  it("markup and bidi characters are diffed as plain characters (rendering escapes them)", () => {
    const parts = diffText("Safe.", 'Safe. <img src=x onerror="alert(1)"> \u202Eevil');
    expect(newText(parts)).toBe('Safe. <img src=x onerror="alert(1)"> \u202Eevil');
    expect(changed(parts)).toEqual([{ op: "added", text: ' <img src=x onerror="alert(1)"> \u202Eevil' }]);
  });

  it("non-Latin words are whole units", () => {
    expect(changed(diffText("Liest die Datei.", "Löscht die Datei."))).toEqual([
      { op: "removed", text: "Liest" },
      { op: "added", text: "Löscht" },
    ]);
    expect(changed(diffText("読む ファイル", "消す ファイル"))).toEqual([
      { op: "removed", text: "読む" },
      { op: "added", text: "消す" },
    ]);
  });

  it("on 300 seeded random edits the parts always rebuild both texts and never repeat an op", () => {
    const words = ["read", "write", "the", "file", "a", "\n", " ", ".", "delete", "notes", "ünï", "  "];
    for (let seed = 1; seed <= 300; seed++) {
      const random = prng(seed);
      const pick = () => words[Math.floor(random() * words.length)] ?? "";
      const before = Array.from({ length: Math.floor(random() * 40) }, pick);
      const after = before.flatMap((w) => {
        const r = random();
        if (r < 0.1) return [];
        if (r < 0.2) return [pick()];
        if (r < 0.3) return [w, pick()];
        return [w];
      });
      const a = before.join("");
      const b = after.join("");
      const parts = diffText(a, b);
      expect(oldText(parts), `seed ${seed}`).toBe(a);
      expect(newText(parts), `seed ${seed}`).toBe(b);
      for (let i = 1; i < parts.length; i++) {
        expect(parts[i]?.op, `seed ${seed} part ${i}`).not.toBe(parts[i - 1]?.op);
        expect(parts[i]?.text, `seed ${seed} part ${i}`).not.toBe("");
      }
    }
  });

  it("a huge rewrite stays fast and still rebuilds both texts (coarser units past the edit bound)", () => {
    const random = prng(42);
    const word = () => Math.floor(random() * 1e9).toString(36);
    const a = Array.from({ length: 30_000 }, word).join(" ");
    const b = Array.from({ length: 30_000 }, word).join(" ");
    const t0 = performance.now();
    const parts = diffText(a, b);
    const ms = performance.now() - t0;
    expect(oldText(parts)).toBe(a);
    expect(newText(parts)).toBe(b);
    expect(ms).toBeLessThan(2_000);
  });

  it("a small edit deep inside a long text is found exactly", () => {
    const long = "word ".repeat(5_000);
    const parts = diffText(`${long}old ${long}`, `${long}new ${long}`);
    expect(changed(parts)).toEqual([
      { op: "removed", text: "old" },
      { op: "added", text: "new" },
    ]);
  });
});

describe("diffSchemas (structural schema diff)", () => {
  const base = {
    type: "object",
    properties: { path: { type: "string" }, recursive: { type: "boolean" } },
    required: ["path"],
  };

  it("equal schemas have no changes, whatever their key order", () => {
    const reordered = {
      required: ["path"],
      properties: { recursive: { type: "boolean" }, path: { type: "string" } },
      type: "object",
    };
    expect(diffSchemas(base, reordered)).toEqual([]);
  });

  it("an added property is reported at its path with its schema", () => {
    const after = { ...base, properties: { ...base.properties, force: { type: "boolean", default: true } } };
    expect(diffSchemas(base, after)).toEqual([
      { path: "properties.force", kind: "added", after: { type: "boolean", default: true } },
    ]);
  });

  it("a removed property is reported with its old schema", () => {
    const after = { ...base, properties: { path: { type: "string" } } };
    expect(diffSchemas(base, after)).toEqual([
      { path: "properties.recursive", kind: "removed", before: { type: "boolean" } },
    ]);
  });

  it("a changed type is reported at the deepest path with before and after", () => {
    const after = { ...base, properties: { ...base.properties, path: { type: "number" } } };
    expect(diffSchemas(base, after)).toEqual([
      { path: "properties.path.type", kind: "changed", before: "string", after: "number" },
    ]);
  });

  it("a list of plain values (required, enum) is compared as a whole", () => {
    expect(diffSchemas(base, { ...base, required: ["path", "recursive"] })).toEqual([
      { path: "required", kind: "changed", before: ["path"], after: ["path", "recursive"] },
    ]);
    expect(diffSchemas({ enum: ["a", "b"] }, { enum: ["b"] })).toEqual([
      { path: "enum", kind: "changed", before: ["a", "b"], after: ["b"] },
    ]);
  });

  it("lists of schemas (anyOf) are compared item by item", () => {
    const before = { anyOf: [{ type: "string" }, { type: "null" }] };
    const after = { anyOf: [{ type: "string", maxLength: 10 }, { type: "null" }, { type: "number" }] };
    expect(diffSchemas(before, after)).toEqual([
      { path: "anyOf[0].maxLength", kind: "added", after: 10 },
      { path: "anyOf[2]", kind: "added", after: { type: "number" } },
    ]);
  });

  it("property names that are not identifiers are quoted in the path", () => {
    const before = { properties: { "a.b": { type: "string" }, "with space": { type: "string" } } };
    const after = { properties: { "a.b": { type: "number" } } };
    expect(diffSchemas(before, after)).toEqual([
      { path: 'properties["a.b"].type', kind: "changed", before: "string", after: "number" },
      { path: 'properties["with space"]', kind: "removed", before: { type: "string" } },
    ]);
  });

  it("an object replaced by another kind of value is one change at that path", () => {
    expect(diffSchemas({ items: { type: "string" } }, { items: true })).toEqual([
      { path: "items", kind: "changed", before: { type: "string" }, after: true },
    ]);
  });

  it("a schema that appears or disappears is one change at the root", () => {
    const schema = { type: "object" };
    expect(diffSchemas(null, schema)).toEqual([{ path: "", kind: "added", after: schema }]);
    expect(diffSchemas(schema, null)).toEqual([{ path: "", kind: "removed", before: schema }]);
    expect(diffSchemas(null, null)).toEqual([]);
  });

  it("changes come in key order, each once", () => {
    const before = { b: 1, a: { y: 1, x: 1 }, c: 1 };
    const after = { c: 2, a: { x: 2, y: 1 }, d: 1 };
    expect(diffSchemas(before, after).map((c) => `${c.kind} ${c.path}`)).toEqual([
      "changed a.x",
      "removed b",
      "changed c",
      "added d",
    ]);
  });
});

describe("diffAnnotations (flips called out)", () => {
  it("readOnlyHint true → false is called out as riskier", () => {
    expect(diffAnnotations({ readOnlyHint: true }, { readOnlyHint: false })).toEqual([
      { key: "readOnlyHint", before: true, after: false, text: "readOnlyHint: true → false", riskier: true },
    ]);
  });

  it("an annotation that disappears or appears reads as (not set)", () => {
    expect(diffAnnotations({ readOnlyHint: true }, null).map((f) => [f.text, f.riskier])).toEqual([
      ["readOnlyHint: true → (not set)", true],
    ]);
    expect(diffAnnotations({}, { destructiveHint: true }).map((f) => [f.text, f.riskier])).toEqual([
      ["destructiveHint: (not set) → true", false],
    ]);
  });

  it("riskier follows each hint's meaning and its MCP default", () => {
    const risk = (key: string, before: unknown, after: unknown) =>
      diffAnnotations({ [key]: before }, { [key]: after })[0]?.riskier;
    expect(risk("destructiveHint", false, true)).toBe(true);
    expect(risk("destructiveHint", true, false)).toBe(false);
    expect(risk("idempotentHint", true, false)).toBe(true);
    expect(risk("openWorldHint", false, true)).toBe(true);
    expect(risk("readOnlyHint", false, true)).toBe(false);
    expect(risk("title", "Read", "Delete")).toBe(false);
    // destructiveHint defaults to true: dropping an explicit false is riskier.
    expect(diffAnnotations({ destructiveHint: false }, {})[0]?.riskier).toBe(true);
  });

  it("hints come first in a fixed order, then other keys by name", () => {
    const flips = diffAnnotations(
      { title: "a", openWorldHint: true, readOnlyHint: true, zeta: 1 },
      { title: "b", openWorldHint: false, readOnlyHint: false, alpha: 1 },
    );
    expect(flips.map((f) => f.key)).toEqual(["readOnlyHint", "openWorldHint", "alpha", "title", "zeta"]);
  });

  it("unchanged and null-vs-missing annotations are not flips", () => {
    expect(diffAnnotations(null, {})).toEqual([]);
    expect(diffAnnotations({ readOnlyHint: true, title: "x" }, { title: "x", readOnlyHint: true })).toEqual(
      [],
    );
  });

  it("long values are shortened in the text", () => {
    const [flip] = diffAnnotations({ title: "short" }, { title: "x".repeat(200) });
    expect(flip?.text.length).toBeLessThan(90);
    expect(flip?.after).toBe("x".repeat(200));
  });
});

describe("diffDefinitions", () => {
  const def = (over: Partial<ToolDefinitionView> = {}): ToolDefinitionView => ({
    name: "read_file",
    description: "Reads a file.",
    inputSchema: { type: "object", properties: { path: { type: "string" } } },
    outputSchema: null,
    annotations: { readOnlyHint: true },
    ...over,
  });

  it("equal definitions have nothing to show", () => {
    expect(diffDefinitions(def(), def())).toEqual({
      name: null,
      title: null,
      description: null,
      inputSchema: [],
      outputSchema: [],
      annotations: [],
      icons: false,
      summary: [],
      riskier: false,
    });
  });

  it("a change of every part is summarised part by part, flips spelled out", () => {
    const diff = diffDefinitions(
      def(),
      def({
        name: "read_file2",
        title: "Read a file",
        description: "Reads a file, then deletes it.",
        inputSchema: { type: "object", properties: { path: { type: "number" } } },
        outputSchema: { type: "object" },
        annotations: { readOnlyHint: false },
        icons: [{ src: "data:image/png;base64,iVBORw0KGgo=" }],
      }),
    );
    expect(diff.summary).toEqual([
      'name: "read_file" → "read_file2"',
      'title: (not set) → "Read a file"',
      "description",
      "input schema",
      "output schema",
      "readOnlyHint: true → false",
      "icons",
    ]);
    expect(diff.name).toEqual({ before: "read_file", after: "read_file2" });
    expect(diff.title).toEqual({ before: null, after: "Read a file" });
    expect(diff.icons).toBe(true);
    expect(diff.riskier).toBe(true);
    expect(diff.inputSchema).toEqual([
      { path: "properties.path.type", kind: "changed", before: "string", after: "number" },
    ]);
    expect(diff.outputSchema).toEqual([{ path: "", kind: "added", after: { type: "object" } }]);
  });

  it("only a description change leaves the schemas and annotations empty", () => {
    const diff = diffDefinitions(def(), def({ description: "Reads two files." }));
    expect(diff.summary).toEqual(["description"]);
    expect(diff.riskier).toBe(false);
    expect(diff.inputSchema).toEqual([]);
    expect(diff.annotations).toEqual([]);
  });
});
