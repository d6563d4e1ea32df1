"use client";

import { useMutation } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { Button, ErrorAlert, Section, TextField } from "@/components/ui";
import { ChangePasswordBody } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode } from "@/lib/format";

const fieldLabels: Record<string, string> = { current: "Current password", password: "New password" };

/**
 * "Your password": the signed-in person changes their own password. The current one is asked for
 * (a session left open on someone else's screen must not be enough), the new one typed twice;
 * every other session of theirs ends, this one stays. Errors show in the form, the fields keep
 * what was typed except on success, when all are cleared.
 */
export function ChangePasswordForm({ userName }: { userName: string }) {
  const id = useId();
  const [formError, setFormError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const change = useMutation({
    mutationFn: (body: { current: string; password: string }) => endpoints.me.changePassword(body),
  });

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = event.currentTarget;
    const data = new FormData(form);
    setDone(null);
    const parsed = ChangePasswordBody.safeParse({
      current: data.get("current"),
      password: data.get("password"),
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = String(issue?.path[0] ?? "password");
      setFormError(
        field === "current"
          ? "Current password: type it first."
          : `${fieldLabels[field] ?? "New password"}: ${issue?.message ?? "not valid"}`,
      );
      return;
    }
    if (data.get("repeat") !== parsed.data.password) {
      setFormError("Repeat the new password: the two do not match.");
      return;
    }
    setFormError(null);
    change.mutate(parsed.data, {
      onSuccess: ({ sessionsEnded }) => {
        form.reset();
        setDone(
          sessionsEnded === 0
            ? "Password changed."
            : `Password changed; ${sessionsEnded} other session${sessionsEnded === 1 ? "" : "s"} signed out.`,
        );
      },
    });
  }

  const error = formError ?? (change.isError ? errorWithCode(change.error) : null);
  return (
    <Section
      title="Your password"
      description={`Signed in as ${userName}. Changing it signs you out everywhere else.`}
    >
      <form
        onSubmit={onSubmit}
        aria-labelledby={`${id}-title`}
        noValidate
        className="space-y-4 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs"
      >
        <h3 id={`${id}-title`} className="font-medium text-zinc-900">
          Change your password
        </h3>
        {/* For password managers: whose password this is. */}
        <input type="text" name="username" autoComplete="username" value={userName} readOnly hidden />
        <div className="grid gap-4 sm:grid-cols-3">
          <TextField
            id={`${id}-current`}
            name="current"
            label="Current password"
            type="password"
            autoComplete="current-password"
            required
          />
          <TextField
            id={`${id}-password`}
            name="password"
            label="New password"
            type="password"
            autoComplete="new-password"
            hint="At least 10 characters."
            required
          />
          <TextField
            id={`${id}-repeat`}
            name="repeat"
            label="Repeat the new password"
            type="password"
            autoComplete="new-password"
            required
          />
        </div>
        {error ? <ErrorAlert>{error}</ErrorAlert> : null}
        {done ? (
          <p role="status" className="text-sm text-emerald-700">
            {done}
          </p>
        ) : null}
        <Button type="submit" variant="primary" disabled={change.isPending}>
          Change password
        </Button>
      </form>
    </Section>
  );
}
