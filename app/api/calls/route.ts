import { z } from "zod";
import { CallBody } from "@/lib/api-types";
import { requesterOf } from "@/server/calls/access";
import { json, route, who } from "@/server/http/route";

export const POST = route({ access: ["agent", "owner"], body: CallBody }, async (ctx) => {
  const { httpStatus, call } = await ctx.runtime.broker.request(requesterOf(who(ctx)), ctx.body);
  return json(call, httpStatus);
});

const ListQuery = z.object({
  status: z
    .enum(["refused", "pending", "running", "succeeded", "failed", "denied", "expired", "interrupted"])
    .optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

export const GET = route({ access: ["agent", "reviewer"], query: ListQuery }, (ctx) => {
  const p = who(ctx);
  const requester = p.kind === "agent" ? requesterOf(p) : undefined;
  return { calls: ctx.runtime.broker.list({ ...ctx.query, requester }) };
});
