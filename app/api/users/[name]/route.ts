import { UpdateUserBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { signedOutCookie } from "@/server/auth/signin";
import { pendingWithdrawal, removeUser, updatePerson } from "@/server/auth/user-admin";
import { transition } from "@/server/calls/transition";
import { holdingBus } from "@/server/events";
import { json, route, who } from "@/server/http/route";

/**
 * `PATCH /api/users/:name {email?, roles?, password?}`: sets a person's address ("" clears it),
 * roles and/or password (a reset: all their sessions end, their sign-in lockout is lifted). A
 * role taken may end grants: open grant lists are told. Resetting your own password signs you
 * out too.
 */
export const PATCH = route({ access: ["owner"], body: UpdateUserBody }, async (ctx) => {
  const actor = principalName(who(ctx));
  const name = ctx.params.name ?? "";
  const { user, sessionsEnded } = await updatePerson(ctx.runtime.db, ctx.runtime.throttle, {
    name,
    email: ctx.body.email,
    roles: ctx.body.roles,
    password: ctx.body.password,
    actor,
  });
  if (ctx.body.roles) ctx.runtime.bus.publish({ type: "grants" });
  const signedOut = ctx.body.password !== undefined && name === actor;
  return json(
    { user, sessionsEnded },
    200,
    signedOut ? { "Set-Cookie": signedOutCookie(ctx.req) } : undefined,
  );
});

/**
 * `DELETE /api/users/:name`: removes a person (never the last owner, 409). Their grants end,
 * their pending calls are withdrawn, their sessions end; history keeps their name. Removing
 * yourself signs you out.
 */
export const DELETE = route({ access: ["owner"] }, async (ctx) => {
  const { db, bus } = ctx.runtime;
  const actor = principalName(who(ctx));
  // The calls withdrawn are told once the removal has committed: on PostgreSQL its transaction
  // may run more than once, and an attempt rolled back must tell nobody.
  const holding = holdingBus();
  const removed = await removeUser(db, {
    name: ctx.params.name ?? "",
    actor,
    withdrawPending: async (tx, requester, why) => {
      holding.clear();
      const moved = await transition(tx, holding.bus, pendingWithdrawal(requester, why, actor));
      return moved.length;
    },
  });
  holding.release(bus);
  bus.publish({ type: "grants" });
  const signedOut = removed.user.name === actor;
  return json(removed, 200, signedOut ? { "Set-Cookie": signedOutCookie(ctx.req) } : undefined);
});
