import { route } from "@/server/http/route";
import { listRules } from "@/server/rules";

/** The rules of gatehouse.json in the order they are tried, with hit counts (owners and reviewers). */
export const GET = route({ access: ["owner", "reviewer"] }, (ctx) =>
  listRules(ctx.runtime.db, ctx.runtime.config.rules),
);
