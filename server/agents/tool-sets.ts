import "server-only";
import { GatehouseError } from "@/lib/errors";
import type { ToolSetConfig } from "../config";
import { anyGlobMatches } from "../rules/glob";

/** Who asks, as far as tool sets go: an agent's token may name a set; a person never has one. */
export interface SetHolder {
  kind: "agent" | "user";
  name: string;
  /** The token's set; null or absent: every enabled tool. */
  toolSet?: string | null;
}

/**
 * The configured tool sets (PRODUCT.md §16): which local tool names a token in each set may see
 * and call. A token without a set, and every person, sees every enabled tool. A token whose set
 * the configuration no longer has sees nothing (fails closed: a renamed set must not widen an
 * agent's reach to everything).
 */
export class ToolSets {
  private readonly byName: Map<string, readonly string[]>;

  constructor(sets: readonly ToolSetConfig[]) {
    this.byName = new Map(sets.map((s) => [s.name, s.tools]));
  }

  /** The configured set names, sorted. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The globs of set `name`; undefined when there is no such set. */
  globs(name: string): readonly string[] | undefined {
    return this.byName.get(name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** Whether `who` may see and call local tool `tool` (enabled or not: that is the catalogue's say). */
  holds(who: SetHolder, tool: string): boolean {
    const set = who.kind === "agent" ? who.toolSet : null;
    if (set === null || set === undefined) return true;
    const globs = this.byName.get(set);
    return globs !== undefined && anyGlobMatches(globs, tool);
  }

  /** Keeps the tools `who` may see, by their local name. */
  filter<T>(who: SetHolder, items: readonly T[], nameOf: (item: T) => string): T[] {
    const set = who.kind === "agent" ? who.toolSet : null;
    if (set === null || set === undefined) return [...items];
    return items.filter((item) => this.holds(who, nameOf(item)));
  }

  /**
   * Why `who` may not call `tool`, as the refusal the caller is told (`tool_not_in_set`), or null
   * when the set holds it. Asked before the tool is looked up, so an agent cannot learn which
   * tools exist outside its set.
   */
  refusal(who: SetHolder, tool: string): GatehouseError | null {
    if (this.holds(who, tool)) return null;
    const set = who.kind === "agent" ? (who.toolSet ?? "") : "";
    const why = this.byName.has(set)
      ? `"${tool}" is not in tool set "${set}" of this token`
      : `this token's tool set "${set}" is not in the configuration, so it may call no tool; an owner can give it another set`;
    return new GatehouseError("tool_not_in_set", why);
  }
}

/** No sets configured: everyone sees every enabled tool. */
export const NO_TOOL_SETS = new ToolSets([]);
