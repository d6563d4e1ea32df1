import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "sqlite",
  schema: "./server/store/schema-sqlite.ts",
  out: "./drizzle",
});
