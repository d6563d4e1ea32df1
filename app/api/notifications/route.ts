import { route } from "@/server/http/route";

/** Every webhook and the email channel, each with its last 50 deliveries (owners only). */
export const GET = route({ access: ["owner"] }, (ctx) => ctx.runtime.notifier.view());
