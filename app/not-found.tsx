import type { Metadata } from "next";
import Link from "next/link";
import { AuthShell } from "@/components/auth-shell";
import { ConsoleFrame } from "@/components/console-frame";
import { homePathFor } from "@/components/roles";
import { signedInPageUser } from "@/server/http/page";

export const metadata: Metadata = { title: "Not found" };

/**
 * Any path Gatehouse has no page for: said in its own look, with a way back. Someone signed in
 * keeps the console's header (their pages, their name); a visitor gets the sign-in card's look.
 */
export default async function NotFound() {
  const user = await signedInPageUser();
  if (user) {
    const home = homePathFor(user);
    return (
      <ConsoleFrame user={user}>
        <section
          aria-labelledby="no-such-page"
          className="mx-auto max-w-lg rounded-lg border border-dashed border-zinc-300 bg-white px-6 py-10 text-center"
        >
          <h1 id="no-such-page" className="text-lg font-semibold text-zinc-900">
            No such page
          </h1>
          <p className="mt-2 text-sm text-zinc-600">Gatehouse has no page at this address.</p>
          <Link href={home} className="mt-4 inline-block text-sm font-medium text-indigo-700 hover:underline">
            Go to {home === "/servers" ? "Servers" : "Approvals"}
          </Link>
        </section>
      </ConsoleFrame>
    );
  }
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
