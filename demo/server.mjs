#!/usr/bin/env node
/**
 * The bundled demo MCP server (stdio, on SDK v2): a tiny notebook, for clients of either protocol
 * era: 2026-07-28 to one that opens with `server/discover`, 2025 to one that opens with
 * `initialize` (the connection keeps the era it opened with).
 *
 * - `list_notes` (annotated readOnlyHint: true) returns the notes.
 * - `add_note` (no annotations, so Gatehouse treats it as destructive) appends a note.
 *
 * State lives in a JSON file (`DEMO_STATE_FILE`, default `data/demo-state.json` under the
 * working directory) that also counts how many times `add_note` really ran, so tests can check
 * that an approved call ran exactly once and a pending one not at all.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Server } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";

const stateFile = path.resolve(process.env.DEMO_STATE_FILE ?? path.join("data", "demo-state.json"));

function load() {
  try {
    return JSON.parse(readFileSync(stateFile, "utf8"));
  } catch {
    return { notes: [], addNoteRuns: 0 };
  }
}

function save(state) {
  mkdirSync(path.dirname(stateFile), { recursive: true });
  const tmp = `${stateFile}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(state, null, 2));
  renameSync(tmp, stateFile);
}

const tools = [
  {
    name: "list_notes",
    description: "List the notes in the demo notebook.",
    inputSchema: { type: "object", properties: {}, additionalProperties: false },
    annotations: { readOnlyHint: true },
  },
  {
    name: "add_note",
    description: "Add a note to the demo notebook.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string", minLength: 1, maxLength: 2000, description: "The note's text" } },
      required: ["text"],
      additionalProperties: false,
    },
  },
];

/** Answers one `tools/call`; the notebook is the state file, so any instance answers alike. */
function call(name, args) {
  if (name === "list_notes") {
    const { notes } = load();
    const text =
      notes.length === 0 ? "The notebook is empty." : notes.map((n, i) => `${i + 1}. ${n}`).join("\n");
    return { content: [{ type: "text", text }], structuredContent: { notes } };
  }
  if (name === "add_note") {
    if (typeof args.text !== "string" || args.text.length === 0) {
      return { isError: true, content: [{ type: "text", text: "text must be a non-empty string" }] };
    }
    const state = load();
    state.notes.push(args.text);
    state.addNoteRuns += 1;
    save(state);
    return { content: [{ type: "text", text: `Added note ${state.notes.length}: ${args.text}` }] };
  }
  return { isError: true, content: [{ type: "text", text: `unknown tool ${name}` }] };
}

/** The connection's server: serveStdio asks for one once it knows the era the client opened with. */
function factory() {
  const server = new Server({ name: "gatehouse-demo", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", async () => ({ tools }));
  server.setRequestHandler("tools/call", async (req) => call(req.params.name, req.params.arguments ?? {}));
  return server;
}

serveStdio(factory, { legacy: "serve" });
