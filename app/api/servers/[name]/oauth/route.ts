import { endGrant, startSignIn } from "@/server/http/oauth";
import { route } from "@/server/http/route";

export const POST = route({ access: ["owner"] }, startSignIn);
export const DELETE = route({ access: ["owner"] }, endGrant);
