import { redirect } from "next/navigation";
import { homePathFor } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export default async function HomePage() {
  const user = await currentPageUser();
  redirect(user ? homePathFor(user) : "/login");
}
