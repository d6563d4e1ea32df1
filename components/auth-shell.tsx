import type { ReactNode } from "react";

/** The centred card around the sign-in and setup forms; `footer` goes below the card's body, set apart. */
export function AuthShell({
  title,
  subtitle,
  children,
  footer,
}: {
  title: string;
  subtitle?: ReactNode;
  children: ReactNode;
  footer?: ReactNode;
}) {
  return (
    <main className="flex min-h-screen items-center justify-center px-4 py-12">
      <div className="w-full max-w-sm">
        <p className="mb-6 text-center text-sm font-semibold tracking-tight text-indigo-700">Gatehouse</p>
        <div className="rounded-lg border border-zinc-200 bg-white p-6 shadow-sm">
          <h1 className="text-lg font-semibold text-zinc-900">{title}</h1>
          {subtitle ? <p className="mt-1 text-sm text-zinc-500">{subtitle}</p> : null}
          <div className="mt-6">{children}</div>
          {footer ? (
            <div className="mt-6 space-y-2 border-t border-zinc-100 pt-4 text-sm text-zinc-600">{footer}</div>
          ) : null}
        </div>
      </div>
    </main>
  );
}

/** The command that sets a person's password on the server (server/cli/main.ts, `user set`). */
export const SET_PASSWORD_COMMAND = "npm run gatehouse -- user set NAME --password";

/**
 * Where an account and a forgotten password come from, true for everyone who reads it: a
 * reviewer, an owner among several, and a lone owner (for whom the server's command is the way).
 */
export function SignInHelp() {
  return (
    <>
      <p>
        <span className="font-medium text-zinc-800">No account yet?</span> Ask whoever runs this Gatehouse.
      </p>
      <p>
        <span className="font-medium text-zinc-800">Forgot your password?</span> An owner can set a new one in
        Settings. On the server, this command sets one; it reads the new password from its input:
      </p>
      <code className="block overflow-x-auto whitespace-nowrap rounded-md bg-zinc-100 px-2 py-1.5 font-mono text-[0.6875rem] text-zinc-800">
        {SET_PASSWORD_COMMAND}
      </code>
    </>
  );
}
