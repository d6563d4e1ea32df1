import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { NotAllowed } from "@/components/not-allowed";
import { isOwner } from "@/components/roles";
import { ToolsView } from "@/components/tools-view";
import { currentPageUser } from "@/server/auth/page";

export const metadata: Metadata = { title: "Tools" };

export default async function ToolsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) return <NotAllowed audience="owners" />;
  return <ToolsView />;
}
