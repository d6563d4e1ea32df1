import { route } from "@/server/http/route";

/** A call's whole story for reviewers and owners: the call (result capped) and its audit rows. */
export const GET = route({ access: ["reviewer"] }, (ctx) => ctx.runtime.broker.story(ctx.params.id ?? ""));
