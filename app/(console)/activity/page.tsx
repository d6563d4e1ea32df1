import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { type ActivityFilters, ActivityView } from "@/components/activity-view";
import { canReview } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Activity" };

const FILTER_KEYS = ["server", "tool", "status", "requester", "from", "to"] as const;

export default async function ActivityPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) forbidden();
  const params = await searchParams;
  const initial: ActivityFilters = {};
  for (const key of FILTER_KEYS) {
    const value = params[key];
    if (typeof value === "string" && value.trim()) initial[key] = value.trim();
  }
  return <ActivityView initial={initial} />;
}
