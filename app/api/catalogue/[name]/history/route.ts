import { ownerId } from "@/server/catalogue/access";
import { toolHistory } from "@/server/catalogue/changes";
import { route } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, (ctx) =>
  toolHistory(ctx.runtime.db, { localName: ctx.params.name ?? "", userId: ownerId(ctx) }),
);
