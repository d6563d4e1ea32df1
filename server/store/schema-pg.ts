/**
 * The PostgreSQL tables, derived from the one schema definition (`schema-sqlite.ts`) rather than
 * written twice: same tables, columns, keys, indexes and defaults, so one body of queries serves
 * both stores and drizzle-kit generates both sets of migrations from one source.
 *
 * Each column keeps SQLite's storage type (integers, text; booleans as 0/1, timestamps as ISO
 * 8601 text) and SQLite's conversion to and from it, so a value reads back the same on either
 * store and SQL written once (`present = 1`, comparing timestamps as text) means the same.
 * Autoincrement keys become identity columns; `now` defaults become their PostgreSQL spelling.
 */
import { is, SQL, sql } from "drizzle-orm";
import {
  type AnyPgColumn,
  customType,
  foreignKey,
  index,
  integer,
  type PgColumnBuilderBase,
  pgTable,
  uniqueIndex,
} from "drizzle-orm/pg-core";
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
// Relative, not "@/…": drizzle-kit loads this file without the tsconfig path aliases.
import * as sqlite from "./schema-sqlite";

/** `now` as schema-sqlite spells it, in PostgreSQL: the same ISO 8601 text, milliseconds, UTC. */
const pgNow = sql`(to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;

/**
 * Text compares and sorts byte by byte ("C" collation), as SQLite does, whatever the database's
 * default collation: names list in the same order, and ISO timestamps compare as times.
 */
const storageTypes: Record<string, string> = {
  integer: "integer",
  text: 'text COLLATE "C"',
  real: "double precision",
};

function storageType(column: SQLiteColumn): string {
  const type = storageTypes[column.getSQLType()];
  if (!type) throw new Error(`schema-pg: no PostgreSQL type for ${column.name} (${column.getSQLType()})`);
  return type;
}

function pgColumn(column: SQLiteColumn): PgColumnBuilderBase {
  const autoIncrement = (column as { autoIncrement?: boolean }).autoIncrement === true;
  if (column.primary && autoIncrement)
    return integer(column.name).primaryKey().generatedByDefaultAsIdentity();
  const type = storageType(column);
  const stored = customType<{ data: unknown; driverData: unknown }>({
    dataType: () => type,
    toDriver: (value) => column.mapToDriverValue(value),
    fromDriver: (value) => column.mapFromDriverValue(value),
  });
  let builder = stored(column.name);
  if (column.notNull) builder = builder.notNull();
  if (column.primary) builder = builder.primaryKey();
  if (column.isUnique) builder = builder.unique(column.uniqueName);
  if (column.default !== undefined) {
    if (is(column.default, SQL)) {
      if (column.default !== sqlite.now)
        throw new Error(`schema-pg: no PostgreSQL spelling of ${column.name}'s default`);
      builder = builder.default(pgNow);
    } else {
      builder = builder.default(column.mapToDriverValue(column.default));
    }
  }
  if (column.defaultFn) builder = builder.$defaultFn(column.defaultFn);
  return builder;
}

const derived = new Map<string, ReturnType<typeof pgTable>>();

/** `table` as a PostgreSQL table; tables it references must have been derived before it. */
function pgTableOf<T extends SQLiteTable>(table: T): T {
  const config = getTableConfig(table);
  const builders = Object.fromEntries(
    Object.entries(table as unknown as Record<string, SQLiteColumn>)
      .filter(([, value]) => config.columns.includes(value))
      .map(([key, column]) => [key, pgColumn(column)]),
  );
  const out = pgTable(config.name, builders, (t) => {
    const byName = (c: SQLiteColumn) => {
      const found = Object.values(t).find((pc) => (pc as AnyPgColumn).name === c.name);
      if (!found) throw new Error(`schema-pg: ${config.name}.${c.name} not derived`);
      return found as AnyPgColumn;
    };
    const extras: unknown[] = [];
    for (const ix of config.indexes) {
      const cols = ix.config.columns.map((c) => {
        if (is(c, SQL)) throw new Error(`schema-pg: index ${ix.config.name} on an expression`);
        return byName(c as SQLiteColumn);
      }) as [AnyPgColumn, ...AnyPgColumn[]];
      if (ix.config.where) throw new Error(`schema-pg: partial index ${ix.config.name}`);
      extras.push((ix.config.unique ? uniqueIndex : index)(ix.config.name).on(...cols));
    }
    for (const fk of config.foreignKeys) {
      const ref = fk.reference();
      const target = derived.get(getTableConfig(ref.foreignTable).name);
      if (!target) throw new Error(`schema-pg: ${config.name} references a table not derived yet`);
      const targetColumns = ref.foreignColumns.map((fc) => {
        const found = Object.values(target).find((pc) => (pc as AnyPgColumn)?.name === fc.name);
        if (!found) throw new Error(`schema-pg: ${fc.name} missing on the referenced table`);
        return found as AnyPgColumn;
      }) as [AnyPgColumn, ...AnyPgColumn[]];
      let built = foreignKey({
        name: fk.getName(),
        columns: ref.columns.map(byName) as [AnyPgColumn, ...AnyPgColumn[]],
        foreignColumns: targetColumns,
      });
      if (fk.onDelete) built = built.onDelete(fk.onDelete);
      if (fk.onUpdate) built = built.onUpdate(fk.onUpdate);
      extras.push(built);
    }
    if (config.primaryKeys.length > 0 || config.uniqueConstraints.length > 0 || config.checks.length > 0) {
      throw new Error(`schema-pg: ${config.name} has table constraints this derivation does not carry`);
    }
    return extras as never;
  });
  derived.set(config.name, out);
  return out as unknown as T;
}

// In an order where every table comes after the tables it references.
export const users = pgTableOf(sqlite.users);
export const sessions = pgTableOf(sqlite.sessions);
export const setupCodes = pgTableOf(sqlite.setupCodes);
export const agentTokens = pgTableOf(sqlite.agentTokens);
export const tools = pgTableOf(sqlite.tools);
export const catalogueChanges = pgTableOf(sqlite.catalogueChanges);
export const changeReads = pgTableOf(sqlite.changeReads);
export const overCapTools = pgTableOf(sqlite.overCapTools);
export const serverSwitches = pgTableOf(sqlite.serverSwitches);
export const calls = pgTableOf(sqlite.calls);
export const auditEvents = pgTableOf(sqlite.auditEvents);
export const notificationDeliveries = pgTableOf(sqlite.notificationDeliveries);
export const grants = pgTableOf(sqlite.grants);
export const serverOauth = pgTableOf(sqlite.serverOauth);
export const oauthPending = pgTableOf(sqlite.oauthPending);
export const serverHistory = pgTableOf(sqlite.serverHistory);
export const replicas = pgTableOf(sqlite.replicas);
export const serverHolders = pgTableOf(sqlite.serverHolders);
export const mcpSessions = pgTableOf(sqlite.mcpSessions);
export const signInCounters = pgTableOf(sqlite.signInCounters);
export const heldResults = pgTableOf(sqlite.heldResults);
export const linkedUris = pgTableOf(sqlite.linkedUris);
export const agentRates = pgTableOf(sqlite.agentRates);
export const notificationDigests = pgTableOf(sqlite.notificationDigests);
