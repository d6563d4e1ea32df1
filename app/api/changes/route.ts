import { ChangesQuery } from "@/lib/api-types";
import { ownerId } from "@/server/catalogue/access";
import { listChanges } from "@/server/catalogue/changes";
import { route } from "@/server/http/route";

export const GET = route({ access: ["owner"], query: ChangesQuery }, (ctx) =>
  listChanges(ctx.runtime.db, { userId: ownerId(ctx), ...ctx.query }),
);
