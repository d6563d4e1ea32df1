import "server-only";
import type { CallView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Principal } from "../auth/access";
import type { Requester } from "./broker";

export function requesterOf(p: Principal): Requester {
  return p.kind === "agent"
    ? { kind: "agent", name: p.token.name, toolSet: p.token.toolSet }
    : { kind: "user", name: p.user.name };
}

/**
 * Agents see only their own calls; people see their own, and reviewers and owners see all.
 * A call someone may not see answers as not found, so ids cannot be probed.
 */
export function assertMaySee(p: Principal, call: CallView | null, id: string): CallView {
  const mine = (c: CallView) => {
    const r = requesterOf(p);
    return c.requester.kind === r.kind && c.requester.name === r.name;
  };
  const reviewer = p.kind === "user" && (p.user.roles.includes("reviewer") || p.user.roles.includes("owner"));
  if (!call || !(reviewer || mine(call))) throw new GatehouseError("call_not_found", `no call ${id}`);
  return call;
}
