import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { NextSteps } from "@/components/next-steps";
import { isOwner } from "@/components/roles";
import { ServersView } from "@/components/servers-view";
import { approvalSettings, currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Servers" };

export default async function ServersPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) forbidden();
  return (
    <>
      <NextSteps me={user.name} selfApproval={approvalSettings().selfApproval} />
      <ServersView />
    </>
  );
}
