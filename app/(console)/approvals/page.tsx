import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { ApprovalsView } from "@/components/approvals-view";
import { NotAllowed } from "@/components/not-allowed";
import { canReview } from "@/components/roles";
import { currentPageUser, pageViewer } from "@/server/http/page";

export const metadata: Metadata = { title: "Approvals" };

export default async function ApprovalsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) return <NotAllowed audience="reviewers and owners" />;
  return <ApprovalsView viewer={pageViewer(user)} />;
}
