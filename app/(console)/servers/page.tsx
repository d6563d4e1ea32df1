import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { NextSteps } from "@/components/next-steps";
import { NotAllowed } from "@/components/not-allowed";
import { isOwner } from "@/components/roles";
import { ServersView } from "@/components/servers-view";
import { approvalSettings, currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Servers" };

export default async function ServersPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) return <NotAllowed audience="owners" />;
  return (
    <>
      <NextSteps me={user.name} selfApproval={approvalSettings().selfApproval} />
      <ServersView />
    </>
  );
}
