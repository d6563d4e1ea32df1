import type { Metadata } from "next";
import { AuthShell } from "@/components/auth-shell";
import { SetupForm } from "@/components/setup-form";

export const metadata: Metadata = { title: "Set up" };

export default async function SetupPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
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
