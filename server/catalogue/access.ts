import "server-only";
import { GatehouseError } from "@/lib/errors";
import type { Principal } from "../auth/access";

/** The signed-in person's user id; read marks of the change feed belong to people, not agents. */
export function ownerId(ctx: { principal: Principal | null }): number {
  const p = ctx.principal;
  if (p?.kind !== "user") throw new GatehouseError("forbidden", "the change feed is read by people");
  return p.user.id;
}
