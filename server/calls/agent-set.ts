import "server-only";
import { eq, sql } from "drizzle-orm";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { agentTokens } from "../store/schema";

/**
 * The tool set agent `name`'s token has now (null: none, or no such token), read from the store:
 * a call decided under one set is judged by the set its token has when it is born and when it is
 * approved, so an owner's move is never outrun.
 */
export async function currentToolSet(db: Db, name: string): Promise<string | null> {
  const query = prepared(db, "agentTokens.toolSetByName", () =>
    db
      .select({ toolSet: agentTokens.toolSet })
      .from(agentTokens)
      .where(eq(agentTokens.name, sql.placeholder("name")))
      .prepare(),
  );
  const [row] = await query.execute({ name });
  return row?.toolSet ?? null;
}
