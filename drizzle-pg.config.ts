import { defineConfig } from "drizzle-kit";

/** PostgreSQL migrations, generated from the tables schema-pg derives from schema-sqlite. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./server/store/schema-pg.ts",
  out: "./drizzle/pg",
});
