import type { Metadata } from "next";
import { ApprovalSettings } from "@/components/approval-settings";
import { ChangePasswordForm } from "@/components/change-password-form";
import { NotificationsSection } from "@/components/notifications-section";
import { isOwner } from "@/components/roles";
import { TokensSection } from "@/components/tokens-section";
import { PageHeader } from "@/components/ui";
import { UsersSection } from "@/components/users-section";
import { approvalSettings, currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Settings" };

/**
 * Owners manage people, tokens and notifications here; everyone signed in may change their own
 * password and read the approval settings. `?add=reviewer` (a hint's link) opens with the Add
 * user form focused for a reviewer.
 */
export default async function SettingsPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const user = await currentPageUser();
  const adding = (await searchParams).add === "reviewer";
  // A reviewer's settings are their own password; everything else here is the owners'.
  if (!isOwner(user)) {
    return (
      <div>
        <PageHeader title="Settings" subtitle="Your own sign-in." />
        <div className="space-y-12">
          <ChangePasswordForm userName={user.name} />
          <ApprovalSettings settings={approvalSettings()} />
        </div>
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
        <UsersSection currentUser={user.name} addingReviewer={adding} />
        <ChangePasswordForm userName={user.name} />
        <TokensSection />
        <NotificationsSection />
        <ApprovalSettings settings={approvalSettings()} />
      </div>
    </div>
  );
}
