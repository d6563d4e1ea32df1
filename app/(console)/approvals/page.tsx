import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { ApprovalsView } from "@/components/approvals-view";
import { canReview } from "@/components/roles";
import { currentPageUser, pageViewer } from "@/server/http/page";

export const metadata: Metadata = { title: "Approvals" };

export default async function ApprovalsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) forbidden();
  return <ApprovalsView viewer={await pageViewer(user)} />;
}
