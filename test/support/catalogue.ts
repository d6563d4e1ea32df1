/** What the catalogue's tests share: a validated server config, tool definitions, a memory store. */
import type { Tool } from "@modelcontextprotocol/client";
import { type ServerConfig, validateConfig } from "@/server/config";
import type { Db } from "@/server/store/db";
import { openTestDb } from "./store";

/** A stdio server config with the product's defaults, through `validateConfig`. */
export function serverConfig(name: string, extra: Record<string, unknown> = {}): ServerConfig {
  const result = validateConfig(
    { mcpServers: { [name]: { command: "node", enabled: true, ...extra } } },
    { env: {}, baseDir: "/" },
  );
  const server = result.config?.servers[0];
  if (!server) throw new Error(`bad test server config: ${JSON.stringify(result.errors)}`);
  return server;
}

export function tool(name: string, over: Partial<Tool> = {}): Tool {
  return {
    name,
    description: `the ${name} tool`,
    inputSchema: { type: "object", properties: { q: { type: "string" } } },
    ...over,
  } as Tool;
}

export const OPTS = { descriptionMaxChars: 1024 };

/** A migrated, empty store (SQLite in memory, or PostgreSQL in that project), closed after the test. */
export function memoryDb(): Promise<Db> {
  return openTestDb();
}
