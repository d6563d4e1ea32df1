import type { Metadata } from "next";
import { AuthShell, SignInHelp } from "@/components/auth-shell";
import { LoginForm } from "@/components/login-form";
import { safeReturnPath } from "@/lib/return-path";

export const metadata: Metadata = { title: "Sign in" };

/** `?next=` is where to go after signing in: kept only when it is a same-origin path. */
export default async function LoginPage({
  searchParams,
}: {
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const next = safeReturnPath((await searchParams).next);
  const subtitle = next?.startsWith("/approvals/")
    ? "Use your Gatehouse name and password; the call you were sent opens right after."
    : next
      ? "Use your Gatehouse name and password; the page you asked for opens right after."
      : "Use your Gatehouse name and password.";
  return (
    <AuthShell title="Sign in" subtitle={subtitle} footer={<SignInHelp />}>
      <LoginForm next={next} />
    </AuthShell>
  );
}
