import type { Metadata } from "next";
import Link from "next/link";
import { AuthShell } from "@/components/auth-shell";

export const metadata: Metadata = { title: "Not found" };

/** Any path Gatehouse has no page for: said in its own look, with a way back. */
export default function NotFound() {
  return (
    <AuthShell title="No such page" subtitle="Gatehouse has no page at this address.">
      <p className="text-sm text-zinc-700">
        <Link href="/" className="font-medium text-indigo-700 hover:underline">
          Go to Gatehouse
        </Link>{" "}
        — the approvals, tools and servers are there once you are signed in.
      </p>
    </AuthShell>
  );
}
