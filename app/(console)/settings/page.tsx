import type { Metadata } from "next";
import { redirect } from "next/navigation";
import { NotAllowed } from "@/components/not-allowed";
import { isOwner } from "@/components/roles";
import { TokensSection } from "@/components/tokens-section";
import { PageHeader } from "@/components/ui";
import { UsersSection } from "@/components/users-section";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Settings" };

export default async function SettingsPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!isOwner(user)) return <NotAllowed audience="owners" />;
  return (
    <div>
      <PageHeader title="Settings" subtitle="Who may sign in, and which agents may call tools." />
      <div className="space-y-12">
        <UsersSection />
        <TokensSection />
      </div>
    </div>
  );
}
