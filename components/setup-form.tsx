"use client";

import { type FormEvent, useId, useState } from "react";
import { Button, ErrorAlert, TextField } from "@/components/ui";
import { password as passwordSchema, userName } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorMessage } from "@/lib/format";

const NO_CODE =
  "This link has no setup code. Open the setup link Gatehouse printed when it first started (/setup?code=...).";

/**
 * Creates the first owner. The code comes from the link; whether it is good only the API can
 * tell, so a missing or bad code is reported with the API's own answer once the form is sent.
 */
export function SetupForm({ code }: { code: string }) {
  const id = useId();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const name = userName.safeParse(String(form.get("name") ?? ""));
    const password = String(form.get("password") ?? "");
    const confirm = String(form.get("confirm") ?? "");
    if (!name.success) {
      setError(`Name: ${name.error.issues[0]?.message ?? "not valid"}`);
      return;
    }
    const checked = passwordSchema.safeParse(password);
    if (!checked.success) {
      setError(`Password: ${checked.error.issues[0]?.message ?? "not valid"}`);
      return;
    }
    if (password !== confirm) {
      setError("The passwords do not match.");
      return;
    }
    setPending(true);
    setError(null);
    try {
      await endpoints.setup({ code, name: name.data, password });
      // Setup also signs the new owner in.
      window.location.assign("/servers");
    } catch (err) {
      setError(errorMessage(err));
      setPending(false);
    }
  }

  const shown = error ?? (code ? null : NO_CODE);

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
        autoComplete="new-password"
        hint="At least 10 characters."
        required
      />
      <TextField
        id={`${id}-confirm`}
        name="confirm"
        label="Confirm password"
        type="password"
        autoComplete="new-password"
        required
      />
      {shown ? <ErrorAlert>{shown}</ErrorAlert> : null}
      <Button type="submit" variant="primary" className="w-full" disabled={pending}>
        Create owner
      </Button>
    </form>
  );
}
