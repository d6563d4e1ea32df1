import path from "node:path";
import { GatehouseError } from "../../lib/errors";

/** Where the store lives: a SQLite file (the default) or a PostgreSQL database. */
export type StoreLocation = { dialect: "sqlite"; file: string } | { dialect: "postgres"; url: string };

/** Whether `DATABASE_URL` names PostgreSQL (the only kind of URL it may hold). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** `GATEHOUSE_DB`, default `data/gatehouse.db` under the working directory. */
export function dbPathFromEnv(env: Record<string, string | undefined> = process.env): string {
  return path.resolve(/*turbopackIgnore: true*/ env.GATEHOUSE_DB ?? path.join("data", "gatehouse.db"));
}

/**
 * The store this process uses: `DATABASE_URL` (`postgres://…` or `postgresql://…`) selects
 * PostgreSQL; unset or empty, the SQLite file `GATEHOUSE_DB` (default `data/gatehouse.db` under
 * the working directory). Throws `config_invalid` naming `DATABASE_URL` for anything else in it,
 * without repeating the value (it may hold a password).
 */
export function storeLocation(env: Record<string, string | undefined> = process.env): StoreLocation {
  const url = env.DATABASE_URL?.trim();
  if (url) {
    if (!isPostgresUrl(url)) {
      throw new GatehouseError(
        "store_config",
        "DATABASE_URL must be a PostgreSQL URL (postgres://user:password@host:5432/database); unset it to use the SQLite file GATEHOUSE_DB",
      );
    }
    try {
      new URL(url);
    } catch {
      throw new GatehouseError(
        "store_config",
        "DATABASE_URL is not a valid URL (postgres://user:password@host:5432/database)",
      );
    }
    return { dialect: "postgres", url };
  }
  return {
    dialect: "sqlite",
    file: dbPathFromEnv(env),
  };
}

/** `location` for people to read: the file, or the URL without its password. */
export function describeLocation(location: StoreLocation): string {
  if (location.dialect === "sqlite") return `SQLite file ${location.file}`;
  const url = new URL(location.url);
  if (url.password) url.password = "***";
  return `PostgreSQL ${url.toString()}`;
}
