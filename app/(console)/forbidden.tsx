import type { Metadata } from "next";
import { NotAllowed } from "@/components/not-allowed";
import { canReview } from "@/components/roles";
import { currentPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Not allowed" };

/**
 * A console page whose role gate (its `forbidden()`, from next/navigation) refused the signed-in
 * person: HTTP 403, inside the console's header, saying whom the page is for. Everyone has a
 * role, and owners may do what reviewers may, so whoever is refused a page and may review was
 * refused an owners' page.
 */
export default async function Forbidden() {
  const user = await currentPageUser();
  return <NotAllowed audience={canReview(user) ? "owners" : "reviewers and owners"} />;
}
