import { listCatalogue } from "@/server/catalogue/catalogue";
import { route } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, ({ runtime }) => ({ tools: listCatalogue(runtime.db) }));
