import type { Metadata } from "next";
import { forbidden } from "next/navigation";
import { ApprovalDecision } from "@/components/approval-decision";
import { canReview } from "@/components/roles";
import { currentPageUser, pageViewer } from "@/server/http/page";

export const metadata: Metadata = { title: "Approval" };

/**
 * One call for decision, where notifications link to (`/approvals/<id>`). Signing in from here
 * comes back here (`currentPageUser` sends the path along as `next`).
 */
export default async function ApprovalPage({ params }: { params: Promise<{ id: string }> }) {
  const user = await currentPageUser();
  if (!canReview(user)) forbidden();
  const { id } = await params;
  return <ApprovalDecision id={id} viewer={await pageViewer(user)} />;
}
