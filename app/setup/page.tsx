import type { Metadata } from "next";
import Link from "next/link";
import { AuthShell, SignInHelp } from "@/components/auth-shell";
import { SetupForm } from "@/components/setup-form";
import { setupDone } from "@/server/http/page";

export const metadata: Metadata = { title: "Set up" };
// Whether setup is done is known only when asked: never prerendered at build time.
export const dynamic = "force-dynamic";

/** The one-time setup link; once the first owner exists it says so and points to sign-in. */
export default async function SetupPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  if (await setupDone()) {
    return (
      <AuthShell
        title="Already set up"
        subtitle="This Gatehouse has its first owner; the setup link is used up."
        footer={<SignInHelp />}
      >
        <p className="text-sm text-zinc-700">
          <Link href="/login" className="font-medium text-indigo-700 hover:underline">
            Sign in
          </Link>{" "}
          with your Gatehouse name and password.
        </p>
      </AuthShell>
    );
  }
  const raw = (await searchParams).code;
  const code = (Array.isArray(raw) ? raw[0] : raw) ?? "";

  return (
    <AuthShell
      title="Create the first owner"
      subtitle="This one-time link creates the first owner of this Gatehouse and signs you in."
    >
      <SetupForm code={code} />
    </AuthShell>
  );
}
