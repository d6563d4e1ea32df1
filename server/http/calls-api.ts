import "server-only";
import { CallBody, CallListQuery, type CallsPage } from "@/lib/api-types";
import { requesterOf } from "../calls/access";
import { callCursor } from "../calls/broker";
import { json, route, who } from "./route";

/**
 * `/api/calls`, an agent's hot path: exported by app/api/calls/route.ts for Next, and called
 * directly by server/main.ts, which hands over the principal it authenticated.
 */

export const POST = route({ access: ["agent", "owner"], body: CallBody }, async (ctx) => {
  const { httpStatus, call } = await ctx.runtime.broker.request(
    requesterOf(who(ctx)),
    ctx.body,
    ctx.req.headers.get("traceparent"),
  );
  return json(call, httpStatus);
});

export const GET = route(
  { access: ["agent", "reviewer"], query: CallListQuery },
  async (ctx): Promise<CallsPage> => {
    const p = who(ctx);
    const { requester: requesterName, ...filters } = ctx.query;
    // An agent sees only its own calls, whatever it asks for.
    const requester = p.kind === "agent" ? requesterOf(p) : undefined;
    const calls = await ctx.runtime.broker.list({ ...filters, requesterName, requester });
    const last = calls.at(-1);
    return { calls, nextBefore: last && calls.length === filters.limit ? callCursor(last) : null };
  },
);
