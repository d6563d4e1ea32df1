"use client";

import { type FormEvent, useId, useState } from "react";
import { homePathFor } from "@/components/roles";
import { Button, ErrorAlert, TextField } from "@/components/ui";
import { endpoints } from "@/lib/endpoints";
import { errorMessage } from "@/lib/format";
import { safeReturnPath } from "@/lib/return-path";

/**
 * Name and password; once signed in, the browser goes to `next` (checked again here: only a
 * same-origin path counts) or else to the person's home page.
 */
export function LoginForm({ next = null }: { next?: string | null }) {
  const id = useId();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const name = String(form.get("name") ?? "").trim();
    const password = String(form.get("password") ?? "");
    if (!name || !password) {
      setError("Enter your name and password.");
      return;
    }
    setPending(true);
    setError(null);
    try {
      const { user } = await endpoints.session.signIn({ name, password });
      // A full load, so the console starts with this user's session and an empty cache.
      window.location.assign(safeReturnPath(next) ?? homePathFor(user));
    } catch (err) {
      setError(errorMessage(err));
      setPending(false);
    }
  }

  return (
    <form onSubmit={onSubmit} className="space-y-4" noValidate>
      <TextField
        id={`${id}-name`}
        name="name"
        label="Name"
        autoComplete="username"
        required
        autoCapitalize="none"
      />
      <TextField
        id={`${id}-password`}
        name="password"
        label="Password"
        type="password"
        autoComplete="current-password"
        required
      />
      {error ? <ErrorAlert>{error}</ErrorAlert> : null}
      <Button type="submit" variant="primary" className="w-full" disabled={pending}>
        Sign in
      </Button>
    </form>
  );
}
