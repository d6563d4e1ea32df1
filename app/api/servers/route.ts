import { route } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, ({ runtime }) => ({ servers: runtime.servers() }));
