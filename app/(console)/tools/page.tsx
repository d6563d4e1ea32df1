import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { NextSteps } from "@/components/next-steps";
import { isOwner } from "@/components/roles";
import { ToolsView } from "@/components/tools-view";
import { listCatalogue } from "@/server/catalogue/catalogue";
import { approvalSettings, currentPageUser, pageViewer } from "@/server/http/page";
import { getRuntime } from "@/server/runtime";

export const metadata: Metadata = { title: "Tools" };

export default async function ToolsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) forbidden();
  // The catalogue comes with the page, so the table is in the first paint instead of waiting
  // for the scripts and a fetch; live events keep it current from there.
  return (
    <>
      <NextSteps me={user.name} selfApproval={approvalSettings().selfApproval} />
      <ToolsView
        initial={{ tools: await listCatalogue(getRuntime().db) }}
        renderedAt={Date.now()}
        viewer={await pageViewer(user)}
      />
    </>
  );
}
