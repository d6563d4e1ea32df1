import "server-only";

/**
 * Local tool names as agents see them over `/mcp`: `<server>_<tool>`. Its own module because
 * tools (tools.ts) and the listings of resources and prompts (listings.ts) both read it, and
 * neither may import the other.
 */

/** The server part of a local tool name `<server>_<tool>` (server names contain no `_`). */
export function serverOf(localName: string): string {
  const i = localName.indexOf("_");
  return i < 0 ? localName : localName.slice(0, i);
}
