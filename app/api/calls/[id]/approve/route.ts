import { ApproveBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { route, who } from "@/server/http/route";

/** Approves a pending call; `{"grant": {...}}` also allows the same agent what follows. An empty body approves. */
export const POST = route({ access: ["reviewer"], body: ApproveBody, bodyOptional: true }, (ctx) =>
  ctx.runtime.broker.approve(principalName(who(ctx)), ctx.params.id ?? "", { grant: ctx.body.grant }),
);
