import type { Metadata } from "next";
import { ChangePasswordForm } from "@/components/change-password-form";
import { NotificationsSection } from "@/components/notifications-section";
import { isOwner } from "@/components/roles";
import { TokensSection } from "@/components/tokens-section";
import { PageHeader } from "@/components/ui";
import { UsersSection } from "@/components/users-section";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Settings" };

/** Owners manage people, tokens and notifications here; everyone signed in may change their own password. */
export default async function SettingsPage() {
  const user = await currentPageUser();
  // A reviewer's settings are their own password; everything else here is the owners'.
  if (!isOwner(user)) {
    return (
      <div>
        <PageHeader title="Settings" subtitle="Your own sign-in." />
        <ChangePasswordForm userName={user.name} />
      </div>
    );
  }
  return (
    <div>
      <PageHeader
        title="Settings"
        subtitle="Who may sign in, which agents may call tools, and where reviewers are notified."
      />
      <div className="space-y-12">
        <UsersSection currentUser={user.name} />
        <ChangePasswordForm userName={user.name} />
        <TokensSection />
        <NotificationsSection />
      </div>
    </div>
  );
}
