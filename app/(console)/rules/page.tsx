import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { canReview } from "@/components/roles";
import { RulesView } from "@/components/rules-view";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Rules" };

/** Owners' rules, read-only; reviewers may read them too (they explain what reaches the queue). */
export default async function RulesPage() {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) forbidden();
  return <RulesView />;
}
