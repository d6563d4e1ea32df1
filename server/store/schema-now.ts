import { sql } from "drizzle-orm";

/** The SQLite default of every `created_at`-like column: now, as ISO 8601 UTC with milliseconds. */
export const now = sql`(strftime('%Y-%m-%dT%H:%M:%fZ','now'))`;
