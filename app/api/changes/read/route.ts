import { MarkChangesReadBody } from "@/lib/api-types";
import { ownerId } from "@/server/catalogue/access";
import { markChangesRead } from "@/server/catalogue/changes";
import { route } from "@/server/http/route";

export const POST = route({ access: ["owner"], body: MarkChangesReadBody }, (ctx) =>
  markChangesRead(ctx.runtime.db, { userId: ownerId(ctx), upTo: ctx.body.upTo }),
);
