import type { Metadata } from "next";
import { forbidden, redirect } from "next/navigation";
import { CallStory } from "@/components/call-story";
import { canReview } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Call story" };

export default async function CallStoryPage({ params }: { params: Promise<{ id: string }> }) {
  const user = await currentPageUser();
  if (!user) redirect("/login");
  if (!canReview(user)) forbidden();
  const { id } = await params;
  return <CallStory id={id} />;
}
