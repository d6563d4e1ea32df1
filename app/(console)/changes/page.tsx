import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { ChangesView } from "@/components/changes-view";
import { NotAllowed } from "@/components/not-allowed";
import { isOwner } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Changes" };

export default async function ChangesPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) return <NotAllowed audience="owners" />;
  return <ChangesView />;
}
