import { finishSignIn } from "@/server/http/oauth";

export const dynamic = "force-dynamic";
export const GET = finishSignIn;
