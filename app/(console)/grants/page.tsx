import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { GrantsView } from "@/components/grants-view";
import { canReview } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Grants" };

export default async function GrantsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) forbidden();
  return <GrantsView />;
}
