import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { ChangesView } from "@/components/changes-view";
import { isOwner } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Changes" };

export default async function ChangesPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) forbidden();
  return <ChangesView />;
}
