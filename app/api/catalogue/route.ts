import { listCatalogue } from "@/server/catalogue/catalogue";
import { route } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, async ({ runtime }) => ({
  tools: await listCatalogue(runtime.db),
}));
