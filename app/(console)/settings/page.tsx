import type { Metadata } from "next";
import { NotAllowed } from "@/components/not-allowed";
import { NotificationsSection } from "@/components/notifications-section";
import { isOwner } from "@/components/roles";
import { TokensSection } from "@/components/tokens-section";
import { PageHeader } from "@/components/ui";
import { UsersSection } from "@/components/users-section";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Settings" };

export default async function SettingsPage() {
  const user = await currentPageUser();
  if (!isOwner(user)) return <NotAllowed audience="owners" />;
  return (
    <div>
      <PageHeader
        title="Settings"
        subtitle="Who may sign in, which agents may call tools, and where reviewers are notified."
      />
      <div className="space-y-12">
        <UsersSection />
        <TokensSection />
        <NotificationsSection />
      </div>
    </div>
  );
}
