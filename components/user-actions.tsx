"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, type KeyboardEvent, type ReactNode, useId, useState } from "react";
import { Button, ErrorAlert, TextField } from "@/components/ui";
import { UpdateUserBody, type UserView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/** What an owner may do to one person beyond their address and roles. */
export type UserAction = "password" | "sessions" | "remove";

/** A form's key handler: Escape cancels the edit. */
export function cancelOnEscape(onCancel: () => void): (event: KeyboardEvent<HTMLFormElement>) => void {
  return (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      onCancel();
    }
  };
}

function sessionsText(n: number): string {
  return `${n} session${n === 1 ? "" : "s"}`;
}

/** Back to the sign-in page with a full load, which drops every cached query of this user. */
function signedOut(): void {
  window.location.assign("/login");
}

interface ActionProps {
  user: UserView;
  /** The signed-in person is this user. */
  self: boolean;
  /** This user is the only owner. */
  lastOwner: boolean;
  /** Done: `notice` says what happened (shown in the row once the panel closes). */
  onDone: (notice: string) => void;
  onCancel: () => void;
}

/** The panel of one action, under the person's row: a labelled form that Escape or Cancel closes. */
export function UserActionPanel({ action, ...props }: ActionProps & { action: UserAction }) {
  if (action === "password") return <ResetPasswordForm {...props} />;
  if (action === "sessions") return <EndSessionsForm {...props} />;
  return <RemoveUserForm {...props} />;
}

function Panel({
  label,
  onSubmit,
  onCancel,
  children,
}: {
  label: string;
  onSubmit: (event: FormEvent<HTMLFormElement>) => void;
  onCancel: () => void;
  children: ReactNode;
}) {
  return (
    <form
      onSubmit={onSubmit}
      onKeyDown={cancelOnEscape(onCancel)}
      noValidate
      aria-label={label}
      className="max-w-xl space-y-3 rounded-md border border-zinc-200 bg-zinc-50 p-3"
    >
      {children}
    </form>
  );
}

/**
 * An owner types a new password for the person (the same rules as a new user's), to hand over by
 * a private channel; the server never makes one up or sends one back. Every session of theirs
 * ends and their sign-in lockout is lifted.
 */
function ResetPasswordForm({ user, self, onDone, onCancel }: ActionProps) {
  const id = useId();
  const [formError, setFormError] = useState<string | null>(null);
  const reset = useMutation({
    mutationFn: (password: string) => endpoints.users.update(user.name, { password }),
    onSuccess: ({ sessionsEnded }) => {
      if (self) return signedOut();
      onDone(`Password reset for ${user.name}; ${sessionsText(sessionsEnded)} ended.`);
    },
  });

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const parsed = UpdateUserBody.safeParse({ password: new FormData(event.currentTarget).get("password") });
    if (!parsed.success || parsed.data.password === undefined) {
      setFormError(`New password: ${parsed.error?.issues[0]?.message ?? "not valid"}`);
      return;
    }
    setFormError(null);
    reset.mutate(parsed.data.password);
  }

  const error = formError ?? (reset.isError ? errorWithCode(reset.error) : null);
  return (
    <Panel label={`Reset password of ${user.name}`} onSubmit={onSubmit} onCancel={onCancel}>
      <TextField
        id={`${id}-password`}
        name="password"
        label={`New password for ${user.name}`}
        type="password"
        autoComplete="new-password"
        autoFocus
        hint={`At least 10 characters. Give it to ${user.name} by a private channel. Every session of theirs ends${self ? ", yours here too" : ""}.`}
        aria-invalid={error ? true : undefined}
        required
      />
      {error ? <ErrorAlert>{error}</ErrorAlert> : null}
      <div className="flex flex-wrap gap-2">
        <Button type="submit" variant="primary" className="px-2 py-0.5 text-xs" disabled={reset.isPending}>
          Reset password
        </Button>
        <Button className="px-2 py-0.5 text-xs" onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </Panel>
  );
}

/** "Sign out everywhere": every session of the person ends; nothing else of them changes. */
function EndSessionsForm({ user, self, onDone, onCancel }: ActionProps) {
  const end = useMutation({
    mutationFn: () => endpoints.users.endSessions(user.name),
    onSuccess: ({ ended }) => {
      if (self) return signedOut();
      onDone(`Signed ${user.name} out everywhere; ${sessionsText(ended)} ended.`);
    },
  });

  return (
    <Panel
      label={`Sign ${user.name} out everywhere`}
      onSubmit={(event) => {
        event.preventDefault();
        end.mutate();
      }}
      onCancel={onCancel}
    >
      <p className="text-sm text-zinc-800">
        {self
          ? "Sign yourself out on every device, this one included?"
          : `Sign ${user.name} out on every device? Their password, roles and grants stay as they are.`}
      </p>
      {end.isError ? <ErrorAlert>{errorWithCode(end.error)}</ErrorAlert> : null}
      <div className="flex flex-wrap gap-2">
        <Button
          type="submit"
          variant="danger"
          className="px-2 py-0.5 text-xs"
          disabled={end.isPending}
          autoFocus
        >
          Sign out everywhere
        </Button>
        <Button className="px-2 py-0.5 text-xs" onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </Panel>
  );
}

/**
 * Removing a person, confirmed by a button that names them. The last owner cannot be removed
 * (the server refuses it too, 409, and its message shows); removing yourself signs you out.
 */
function RemoveUserForm({ user, self, lastOwner, onDone, onCancel }: ActionProps) {
  const client = useQueryClient();
  const remove = useMutation({
    mutationFn: () => endpoints.users.remove(user.name),
    onSuccess: ({ grantsEnded, callsWithdrawn }) => {
      if (self) return signedOut();
      // Their grants ended and their pending calls were withdrawn: those lists change too.
      void client.invalidateQueries({ queryKey: queryKeys.grants.all });
      void client.invalidateQueries({ queryKey: queryKeys.calls.all });
      void client.invalidateQueries({ queryKey: queryKeys.users.all });
      const grants = `${grantsEnded} grant${grantsEnded === 1 ? "" : "s"} ended`;
      const calls = `${callsWithdrawn} pending call${callsWithdrawn === 1 ? "" : "s"} withdrawn`;
      onDone(`Removed ${user.name}; ${grants}, ${calls}.`);
    },
    onError: () => void client.invalidateQueries({ queryKey: queryKeys.users.all }),
  });

  return (
    <Panel
      label={`Remove ${user.name}`}
      onSubmit={(event) => {
        event.preventDefault();
        if (!lastOwner) remove.mutate();
      }}
      onCancel={onCancel}
    >
      {lastOwner ? (
        <p className="text-sm text-zinc-800">
          {user.name} is the last owner and cannot be removed: make someone else an owner first.
        </p>
      ) : (
        <p className="text-sm text-zinc-800">
          {self ? "Remove yourself? You will be signed out and cannot sign in again. " : ""}
          {`${user.name} will no longer be able to sign in. Grants ${user.name} made end and their pending calls are withdrawn; activity and history keep the name.`}
        </p>
      )}
      {remove.isError ? <ErrorAlert>{errorWithCode(remove.error)}</ErrorAlert> : null}
      <div className="flex flex-wrap gap-2">
        {lastOwner ? null : (
          <Button
            type="submit"
            variant="danger"
            className="px-2 py-0.5 text-xs"
            disabled={remove.isPending}
            autoFocus
          >
            Remove {user.name}
          </Button>
        )}
        <Button className="px-2 py-0.5 text-xs" onClick={onCancel} autoFocus={lastOwner}>
          {lastOwner ? "Close" : "Cancel"}
        </Button>
      </div>
    </Panel>
  );
}
