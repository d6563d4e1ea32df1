import { route, who } from "@/server/http/route";

export const GET = route({ access: ["owner", "reviewer"] }, (ctx) => {
  const p = who(ctx);
  return { user: p.kind === "user" ? p.user : null };
});
