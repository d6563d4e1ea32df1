import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { GrantsView } from "@/components/grants-view";
import { NotAllowed } from "@/components/not-allowed";
import { canReview } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Grants" };

export default async function GrantsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) return <NotAllowed audience="reviewers and owners" />;
  return <GrantsView />;
}
