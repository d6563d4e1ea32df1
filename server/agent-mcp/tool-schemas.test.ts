/**
 * Tool schemas served only as 2025 clients can take them. The oracle is the v1 SDK client itself:
 * its zod shape of a tool's schemas and the Ajv compiling `listTools()` does (its default
 * validator, `ajv-formats` and all). Then through the real path: a v2 fixture server listing
 * schemas v1 refuses (test/fixtures/servers/loose-schemas.mjs), enabled, listed to a real v1
 * client through `/mcp`.
 */
import path from "node:path";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { ToolSchema } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
// What Gatehouse compiles with (SDK v2's validator over the v1 client's Ajv options), to count compiles.
import { AjvJsonSchemaValidator as GatehouseValidator } from "@modelcontextprotocol/server/validators/ajv";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AgentToolView } from "@/lib/api-types";
import { connectMcp } from "@/test/support/mcp";
import { connectModern } from "@/test/support/mcp-modern";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import {
  isServableInputSchema,
  isServableOutputSchema,
  SCHEMA_MAX_VALUES,
  schemaProblem,
  VERDICT_CACHE_MAX,
} from "./tool-schemas";
import { toMcpTool } from "./tools";

/** What a fresh v1 client makes of `schema` as an output schema: its zod shape, then its Ajv. */
function v1ClientTakes(schema: unknown): boolean {
  if (!ToolSchema.shape.outputSchema.safeParse(schema).success) return false;
  try {
    new AjvJsonSchemaValidator().getValidator(schema as never);
    return true;
  } catch {
    return false;
  }
}

const SOUND: Record<string, unknown> = {
  "the bare root": { type: "object" },
  "properties and required": {
    type: "object",
    properties: { a: { type: "string" }, b: { type: "array", items: { type: "integer" } } },
    required: ["a"],
    additionalProperties: false,
  },
  "a 2020-12 $schema": {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { a: { type: "string" } },
  },
  "an unknown $schema": { $schema: "https://example.com/meta", type: "object" },
  "a $ref into $defs": {
    type: "object",
    properties: { a: { $ref: "#/$defs/x" } },
    $defs: { x: { type: "string" } },
  },
  "a known format": { type: "object", properties: { at: { type: "string", format: "date-time" } } },
  "a property called __proto__": JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}'),
  "a property called enum with a nested schema": {
    type: "object",
    properties: { enum: { type: "object", properties: { x: { type: "string" } } } },
  },
  "an array as a property schema (zod takes any object)": { type: "object", properties: { a: [] } },
  "a root $id": { $id: "https://example.com/schemas/out.json", type: "object" },
  "a fragment $id below the root": { type: "object", $defs: { d: { $id: "#d", type: "string" } } },
  // Ajv compiles only the definitions a schema refers to, and so does the client.
  "an unreferenced definition that would not compile": {
    type: "object",
    $defs: { d: { type: "object", required: "x" } },
  },
  "an $id inside data keywords": {
    type: "object",
    default: { $id: "https://example.com/x" },
    enum: [{ $id: "y" }],
  },
};

const REFUSED_BY_V1: Record<string, unknown> = {
  "no object": "object",
  null: null,
  "an array": [],
  "no type": { properties: {} },
  "another type": { type: "string" },
  "required a string": { type: "object", required: "x" },
  "required null": { type: "object", required: null },
  "required of numbers": { type: "object", required: [1] },
  "properties an array": { type: "object", properties: [] },
  "properties null": { type: "object", properties: null },
  "a boolean property schema": { type: "object", properties: { a: true } },
  "a null property schema": { type: "object", properties: { a: null } },
  "an unknown type": { type: "object", properties: { a: { type: "nonsense" } } },
  "a nested required a string": { type: "object", properties: { a: { type: "object", required: "x" } } },
  "a missing local $ref": { type: "object", properties: { a: { $ref: "#/$defs/missing" } } },
  "a remote $ref": { type: "object", properties: { a: { $ref: "https://example.com/remote.json" } } },
  "a pattern that is no regular expression": { type: "object", properties: { a: { pattern: "(" } } },
  "a format that is no string": { type: "object", properties: { a: { type: "string", format: 5 } } },
  "a minimum that is no number": { type: "object", minimum: "x" },
  "additionalProperties a number": { type: "object", additionalProperties: 5 },
};

describe("which schemas are served to 2025 clients", () => {
  it.each(Object.entries(SOUND))(
    "a schema with %s is served whole, as the v1 client takes it",
    (_, schema) => {
      expect(v1ClientTakes(schema)).toBe(true);
      expect(schemaProblem(schema)).toBeNull();
      expect(isServableInputSchema(schema)).toBe(true);
      expect(isServableOutputSchema(schema)).toBe(true);
    },
  );

  it.each(Object.entries(REFUSED_BY_V1))(
    "a schema with %s is not served, as the v1 client refuses it",
    (_, schema) => {
      expect(v1ClientTakes(schema)).toBe(false);
      expect(schemaProblem(schema)).toEqual(expect.any(String));
      expect(isServableInputSchema(schema)).toBe(false);
      expect(isServableOutputSchema(schema)).toBe(false);
    },
  );

  it("an unknown format is served, and compiles without writing to the console", () => {
    const warn = vi.spyOn(console, "warn");
    try {
      const schema = { type: "object", properties: { n: { type: "integer", format: "uint32" } } };
      expect(isServableOutputSchema(schema)).toBe(true);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it("an output schema embedding a resource by $id is not served: with another tool's root $id it breaks the client's list", () => {
    const other = { type: "object", $id: "https://example.com/shared.json" };
    const embedding = {
      type: "object",
      properties: { a: { $id: "https://example.com/shared.json", type: "string" } },
    };
    // Each compiles alone, so each is sound as an input schema (clients do not compile those)…
    expect(v1ClientTakes(other)).toBe(true);
    expect(v1ClientTakes(embedding)).toBe(true);
    expect(isServableInputSchema(embedding)).toBe(true);
    // …but one client compiles every output schema it is served into one Ajv instance.
    const client = new AjvJsonSchemaValidator();
    client.getValidator(other as never);
    expect(() => client.getValidator(embedding as never)).toThrow(/resolves to more than one schema/);
    expect(isServableOutputSchema(other)).toBe(true);
    expect(isServableOutputSchema(embedding)).toBe(false);
  });

  it(`a schema of over ${SCHEMA_MAX_VALUES} values is not compiled, nor served`, () => {
    const properties = Object.fromEntries(
      Array.from({ length: SCHEMA_MAX_VALUES / 2 }, (_, i) => [`p${i}`, { type: "string" }]),
    );
    const getValidator = vi.spyOn(GatehouseValidator.prototype, "getValidator");
    try {
      expect(schemaProblem({ type: "object", properties })).toMatch(/over 10000 values/);
      expect(getValidator).not.toHaveBeenCalled();
    } finally {
      getValidator.mockRestore();
    }
  });

  it("a verdict is kept by the schema's canonical JSON, for at most the cache's size of schemas", () => {
    const getValidator = vi.spyOn(GatehouseValidator.prototype, "getValidator");
    try {
      const first = { type: "object", properties: { kept: { type: "string" } }, required: ["kept"] };
      expect(isServableOutputSchema(first)).toBe(true);
      // The same schema, parsed afresh with its keys in another order: not compiled again.
      expect(
        isServableInputSchema(
          JSON.parse('{"required":["kept"],"properties":{"kept":{"type":"string"}},"type":"object"}'),
        ),
      ).toBe(true);
      expect(getValidator).toHaveBeenCalledTimes(1);
      for (let i = 0; i < VERDICT_CACHE_MAX; i++)
        isServableOutputSchema({ type: "object", title: `filler ${i}` });
      expect(getValidator).toHaveBeenCalledTimes(1 + VERDICT_CACHE_MAX);
      // The oldest went to make room: it is compiled again.
      isServableOutputSchema(first);
      expect(getValidator).toHaveBeenCalledTimes(2 + VERDICT_CACHE_MAX);
    } finally {
      getValidator.mockRestore();
    }
  });
});

describe("toMcpTool serves only schemas a 2025 client can take", () => {
  const base: AgentToolView = {
    name: "srv_tool",
    description: "A tool.",
    inputSchema: { type: "object" },
    outputSchema: null,
    annotations: null,
    destructive: false,
  };

  it("an output schema that does not compile, or whose required is no array, is left out", () => {
    for (const outputSchema of [
      { type: "object", properties: { a: { type: "nonsense" } } },
      { type: "object", required: "x" },
    ]) {
      expect(toMcpTool({ ...base, outputSchema })).not.toHaveProperty("outputSchema");
    }
  });

  it("an input schema a 2025 client cannot take is served as a bare object schema", () => {
    for (const inputSchema of [
      { type: "object", properties: [] },
      { type: "object", properties: { flag: true } },
      { type: "object", properties: { a: { type: "nonsense" } } },
    ]) {
      expect(toMcpTool({ ...base, inputSchema }).inputSchema).toEqual({ type: "object" });
    }
  });

  it("sound schemas are served whole", () => {
    const inputSchema = SOUND["a $ref into $defs"];
    const outputSchema = SOUND["a 2020-12 $schema"];
    const tool = toMcpTool({ ...base, inputSchema, outputSchema });
    expect(tool.inputSchema).toEqual(inputSchema);
    expect(tool.outputSchema).toEqual(outputSchema);
  });
});

const LOOSE = path.join(REPO_ROOT, "test/fixtures/servers/loose-schemas.mjs");
const LOOSE_TOOLS = ["report", "loose_required", "loose_properties", "boolean_property", "uncompilable"].map(
  (name) => `loose_${name}`,
);

describe("through /mcp, with a 2026 upstream listing schemas 2025 refuses", () => {
  let t: TestRuntime | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  async function startWithLooseTools(): Promise<string> {
    t = await startTestRuntime({
      servers: { loose: { command: process.execPath, args: [LOOSE], enabled: true } },
    });
    const { runtime } = t;
    const listed = async () =>
      (await Promise.all(LOOSE_TOOLS.map((name) => getToolRow(runtime.db, name)))).every(
        (row) => row !== null,
      );
    await waitForEvent(runtime.bus, async (e) => e.type === "catalogue" && (await listed()), {
      already: listed,
      what: () => "the loose-schemas server's catalogue",
    });
    for (const name of LOOSE_TOOLS) await enableTool(runtime, name);
    return await createAgentToken(runtime, "bot");
  }

  it("an enabled tool whose output schema does not compile, or whose required is no array, leaves a 2025 SDK client's tools/list working", async () => {
    const token = await startWithLooseTools();
    const agent = await connectMcp({ token });
    try {
      const { tools } = await agent.client.listTools();
      const byName = new Map<string, Tool>(tools.map((tool) => [tool.name, tool]));
      expect([...byName.keys()]).toEqual(expect.arrayContaining(LOOSE_TOOLS));
      for (const name of ["loose_loose_required", "loose_loose_properties", "loose_uncompilable"]) {
        expect(byName.get(name)).not.toHaveProperty("outputSchema");
      }
      for (const name of ["loose_loose_properties", "loose_boolean_property", "loose_uncompilable"]) {
        expect(byName.get(name)?.inputSchema).toEqual({ type: "object" });
      }
      const report = byName.get("loose_report");
      expect(report?.inputSchema).toEqual({
        type: "object",
        properties: { city: { type: "string" } },
        required: ["city"],
      });
      expect(report?.outputSchema).toMatchObject({
        $defs: { reading: expect.any(Object) },
        required: ["city", "at", "reading"],
      });
      // The client validates structuredContent against the output schema it was served.
      const answer = await agent.client.callTool({ name: "loose_report", arguments: { city: "Oslo" } });
      expect(answer.structuredContent).toEqual({
        city: "Oslo",
        at: "2026-12-01T12:00:00Z",
        reading: { celsius: 21 },
      });
    } finally {
      await agent.close();
    }
    // A 2026 client is served the same.
    const modern = await connectModern({ token });
    try {
      const { tools } = await modern.client.listTools();
      expect(tools.find((tool) => tool.name === "loose_loose_required")).not.toHaveProperty("outputSchema");
    } finally {
      await modern.close();
    }
  });

  it("a call to a tool whose input schema does not compile is refused, though agents see a bare object schema", async () => {
    const token = await startWithLooseTools();
    const agent = await connectMcp({ token });
    try {
      const refused = await agent.client.callTool({ name: "loose_uncompilable", arguments: { a: 1 } });
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toMatch(/input schema cannot be compiled/);
      // A boolean property schema compiles: that call is checked against it and goes through.
      const passed = await agent.client.callTool({ name: "loose_boolean_property", arguments: { flag: 1 } });
      expect(passed.isError).toBeFalsy();
      expect(passed.content).toEqual([{ type: "text", text: "ok" }]);
    } finally {
      await agent.close();
    }
  });
});
