"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, Fragment, useEffect, useId, useRef, useState } from "react";
import {
  Badge,
  Button,
  cx,
  EmptyState,
  ErrorAlert,
  inputClass,
  Loading,
  Section,
  TextField,
  tableClass,
  tdClass,
  thClass,
} from "@/components/ui";
import { cancelOnEscape, type UserAction, UserActionPanel } from "@/components/user-actions";
import { CreateUserBody, type Role, roles, UpdateUserBody, type UserView } from "@/lib/api-types";
import { namesText } from "@/lib/decision-text";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

type UsersData = { users: UserView[] };

const roleLabels: Record<Role, string> = { owner: "Owner", reviewer: "Reviewer" };

function upsert(old: UsersData | undefined, user: UserView): UsersData | undefined {
  return old ? { users: [...old.users.filter((u) => u.id !== user.id), user] } : old;
}

function owners(users: UserView[]): number {
  return users.filter((user) => user.roles.includes("owner")).length;
}

const actionLabels: Record<UserAction, string> = {
  password: "Reset password",
  sessions: "Sign out everywhere",
  remove: "Remove",
};

/**
 * The owners' list of people. `currentUser`: the signed-in person's name (their own row differs).
 * `addingReviewer`: the page was opened to add a reviewer (a hint's link): the Add user form is
 * scrolled to and its name field focused (default false).
 */
export function UsersSection({
  currentUser,
  addingReviewer = false,
}: {
  currentUser: string;
  addingReviewer?: boolean;
}) {
  const [removed, setRemoved] = useState<string | null>(null);
  const removedNote = useRef<HTMLParagraphElement>(null);
  useEffect(() => {
    // The removed person's row, and the button that had the focus, are gone: the note takes it.
    if (removed) removedNote.current?.focus();
  }, [removed]);
  const query = useQuery({
    queryKey: queryKeys.users.list(),
    queryFn: ({ signal }) => endpoints.users.list({ signal }),
    select: (data) => [...data.users].sort((a, b) => a.name.localeCompare(b.name)),
  });

  return (
    <Section
      title="Users"
      description="People who sign in to this Gatehouse. Owners manage everything; reviewers approve calls."
    >
      {removed ? (
        <p ref={removedNote} tabIndex={-1} role="status" className="text-sm text-emerald-700">
          {removed}
        </p>
      ) : null}
      {query.isPending ? (
        <Loading label="Loading users…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load users: {errorWithCode(query.error)}</ErrorAlert>
      ) : query.data.length === 0 ? (
        <EmptyState title="No users yet" />
      ) : (
        <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
          <table className={tableClass} aria-label="Users">
            <thead className="bg-zinc-50">
              <tr>
                <th scope="col" className={thClass}>
                  Name
                </th>
                <th scope="col" className={thClass}>
                  Roles
                </th>
                <th scope="col" className={thClass}>
                  Email
                </th>
                <th scope="col" className={thClass}>
                  Created
                </th>
                <th scope="col" className={thClass}>
                  <span className="sr-only">Action</span>
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {query.data.map((user) => (
                <UserRow
                  key={user.id}
                  user={user}
                  self={user.name === currentUser}
                  onRemoved={setRemoved}
                  lastOwner={user.roles.includes("owner") && owners(query.data) === 1}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <AddUserForm addingReviewer={addingReviewer} />
    </Section>
  );
}

/**
 * An address with a preferred line break before each "@", "." and "+", so a long one wraps
 * at its parts rather than mid-word; `overflow-wrap: anywhere` is the fallback for a part
 * longer than the column.
 */
function EmailText({ email }: { email: string }) {
  const parts = email.split(/(?=[@.+])/);
  return (
    <span className="min-w-0 text-zinc-800 [overflow-wrap:anywhere]">
      {parts.map((part, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: the parts of one fixed string, never reordered.
        <span key={i}>
          {i > 0 ? <wbr /> : null}
          {part}
        </span>
      ))}
    </span>
  );
}

/**
 * One person, with their address changed in place: the Edit button opens a small labelled
 * form in the Email cell; an empty field or Remove clears the address, Escape or Cancel
 * closes it. Focus moves into the form on open and back to the Edit button on close. Reset
 * password, Sign out everywhere and Remove open their panel in a row under the person's, and
 * focus goes back to the button that opened it; what was done stays there as a note. Your own
 * row has no Reset password: "Your password" below asks for the current one.
 */
function UserRow({
  user,
  lastOwner,
  self,
  onRemoved,
}: {
  user: UserView;
  lastOwner: boolean;
  self: boolean;
  /** The person was removed: `notice` says what ended with them (their row goes). */
  onRemoved: (notice: string) => void;
}) {
  const client = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [action, setAction] = useState<UserAction | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const lastAction = useRef<UserAction | null>(null);
  const [editingRoles, setEditingRoles] = useState(false);
  const rolesCell = useRef<HTMLTableCellElement>(null);
  const wasEditingRoles = useRef(false);

  useEffect(() => {
    if (wasEditingRoles.current && !editingRoles) rolesCell.current?.querySelector("button")?.focus();
    wasEditingRoles.current = editingRoles;
  }, [editingRoles]);
  // Button takes no ref, so focus is returned through the element around it.
  const actionCell = useRef<HTMLTableCellElement>(null);
  const wasEditing = useRef(false);

  useEffect(() => {
    // Closed to open an action panel instead: the panel has the focus.
    if (wasEditing.current && !editing && action === null)
      actionCell.current?.querySelector("button")?.focus();
    wasEditing.current = editing;
  }, [editing, action]);

  useEffect(() => {
    if (action !== null) {
      lastAction.current = action;
      return;
    }
    const last = lastAction.current;
    lastAction.current = null;
    // Closed to edit the address instead: the address field has the focus.
    if (last !== null && !editing) {
      actionCell.current?.querySelector<HTMLButtonElement>(`button[data-action="${last}"]`)?.focus();
    }
  }, [action, editing]);

  function open(next: UserAction) {
    setNotice(null);
    setEditing(false);
    setAction(next);
  }

  function saved(updated: UserView) {
    client.setQueryData<UsersData>(queryKeys.users.list(), (old) => upsert(old, updated));
    void client.invalidateQueries({ queryKey: queryKeys.users.all });
    setEditing(false);
    setEditingRoles(false);
  }

  const actions: UserAction[] = self ? ["sessions", "remove"] : ["password", "sessions", "remove"];
  return (
    <Fragment>
      <tr data-testid={`user-${user.name}`}>
        <td className={`${tdClass} break-all font-medium text-zinc-900`}>{user.name}</td>
        <td ref={rolesCell} className={tdClass}>
          {editingRoles ? (
            <RolesForm
              user={user}
              lastOwner={lastOwner}
              onSaved={saved}
              onCancel={() => setEditingRoles(false)}
            />
          ) : (
            <span className="flex flex-wrap items-center gap-1">
              {user.roles.map((role) => (
                <Badge key={role} tone={role === "owner" ? "violet" : "blue"}>
                  {role}
                </Badge>
              ))}
              <Button
                className="ml-1 px-2 py-0.5 text-xs"
                aria-label={`Change roles for ${user.name}`}
                onClick={() => setEditingRoles(true)}
              >
                Change roles
              </Button>
            </span>
          )}
        </td>
        <td className={`${tdClass} min-w-40`}>
          {editing ? (
            <EmailForm user={user} onSaved={saved} onCancel={() => setEditing(false)} />
          ) : user.email ? (
            <EmailText email={user.email} />
          ) : (
            <span className="text-zinc-400">No email</span>
          )}
        </td>
        <td className={`${tdClass} whitespace-nowrap text-zinc-600`}>{formatDateTime(user.createdAt)}</td>
        <td ref={actionCell} className={`${tdClass} text-right`}>
          <span className="flex flex-wrap justify-end gap-1">
            {editing ? null : (
              <Button
                className="px-2 py-0.5 text-xs"
                aria-label={`Edit email for ${user.name}`}
                onClick={() => {
                  setAction(null);
                  setEditing(true);
                }}
              >
                Edit
              </Button>
            )}
            {actions.map((a) => (
              <Button
                key={a}
                data-action={a}
                variant={a === "remove" ? "danger" : "secondary"}
                className="px-2 py-0.5 text-xs"
                aria-label={`${actionLabels[a]} ${a === "remove" ? "" : "for "}${user.name}`}
                aria-expanded={action === a}
                onClick={() => (action === a ? setAction(null) : open(a))}
              >
                {actionLabels[a]}
              </Button>
            ))}
          </span>
        </td>
      </tr>
      {action !== null || notice !== null ? (
        <tr data-testid={`user-${user.name}-panel`}>
          <td colSpan={5} className={`${tdClass} bg-zinc-50/50`}>
            {action !== null ? (
              <UserActionPanel
                action={action}
                user={user}
                self={self}
                lastOwner={lastOwner}
                onCancel={() => setAction(null)}
                onDone={(text) => {
                  if (action === "remove") return onRemoved(text);
                  setNotice(text);
                  setAction(null);
                }}
              />
            ) : (
              <p role="status" className="text-sm text-emerald-700">
                {notice}
              </p>
            )}
          </td>
        </tr>
      ) : null}
    </Fragment>
  );
}

function EmailForm({
  user,
  onSaved,
  onCancel,
}: {
  user: UserView;
  onSaved: (user: UserView) => void;
  onCancel: () => void;
}) {
  const id = useId();
  const [formError, setFormError] = useState<string | null>(null);
  const update = useMutation({
    mutationFn: (email: string) => endpoints.users.update(user.name, { email }),
    onSuccess: ({ user: updated }) => onSaved(updated),
  });

  function save(raw: string) {
    const parsed = UpdateUserBody.safeParse({ email: raw });
    if (!parsed.success) {
      setFormError(`Email: ${parsed.error.issues[0]?.message ?? "not valid"}`);
      return;
    }
    setFormError(null);
    // Given above, so present: the schema only trims it.
    update.mutate(parsed.data.email ?? "");
  }

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    save(String(new FormData(event.currentTarget).get("email") ?? ""));
  }

  const onKeyDown = cancelOnEscape(onCancel);

  const error = formError ?? (update.isError ? errorWithCode(update.error) : null);
  return (
    <form onSubmit={onSubmit} onKeyDown={onKeyDown} noValidate className="max-w-md space-y-2">
      <label htmlFor={`${id}-email`} className="sr-only">
        Email for {user.name}
      </label>
      <input
        id={`${id}-email`}
        name="email"
        type="email"
        defaultValue={user.email ?? ""}
        placeholder="name@example.com"
        autoComplete="off"
        autoCapitalize="none"
        spellCheck={false}
        // biome-ignore lint/a11y/noAutofocus: the person asked to edit this field just now.
        autoFocus
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? `${id}-error` : undefined}
        className={inputClass}
      />
      {error ? (
        <div id={`${id}-error`}>
          <ErrorAlert>{error}</ErrorAlert>
        </div>
      ) : null}
      <div className="flex flex-wrap gap-2">
        <Button type="submit" variant="primary" className="px-2 py-0.5 text-xs" disabled={update.isPending}>
          Save
        </Button>
        {user.email ? (
          <Button
            variant="danger"
            className="px-2 py-0.5 text-xs"
            disabled={update.isPending}
            onClick={() => save("")}
          >
            Remove
          </Button>
        ) : null}
        <Button className="px-2 py-0.5 text-xs" onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </form>
  );
}

/**
 * A person's roles as checkboxes, saved together (`PATCH roles`). At least one stays ticked; the
 * last owner's Owner box cannot be cleared (the server refuses it too, 409, and its message shows).
 * Escape or Cancel closes it.
 */
function RolesForm({
  user,
  lastOwner,
  onSaved,
  onCancel,
}: {
  user: UserView;
  lastOwner: boolean;
  onSaved: (user: UserView) => void;
  onCancel: () => void;
}) {
  const id = useId();
  const [chosen, setChosen] = useState<Role[]>(user.roles);
  const [formError, setFormError] = useState<string | null>(null);
  const client = useQueryClient();
  const update = useMutation({
    mutationFn: (next: Role[]) => endpoints.users.update(user.name, { roles: next }),
    onSuccess: ({ user: updated }) => onSaved(updated),
    // Refused (e.g. the last owner, after someone else changed roles): show everyone as they now are.
    onError: () => void client.invalidateQueries({ queryKey: queryKeys.users.all }),
  });

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (chosen.length === 0) {
      setFormError("Choose at least one role.");
      return;
    }
    setFormError(null);
    update.mutate(roles.filter((role) => chosen.includes(role)));
  }

  const onKeyDown = cancelOnEscape(onCancel);

  const error = formError ?? (update.isError ? errorWithCode(update.error) : null);
  return (
    <form
      onSubmit={onSubmit}
      onKeyDown={onKeyDown}
      noValidate
      aria-label={`Roles of ${user.name}`}
      className="space-y-2"
    >
      <div className="flex flex-wrap gap-x-4 gap-y-1">
        {roles.map((role) => {
          const locked = role === "owner" && lastOwner && chosen.includes("owner");
          const firstFree = roles.find((r) => !(r === "owner" && lastOwner && chosen.includes("owner")));
          return (
            <label key={role} className="flex items-center gap-2 text-sm text-zinc-800">
              <input
                type="checkbox"
                name={`role-${role}`}
                checked={chosen.includes(role)}
                disabled={locked || update.isPending}
                // biome-ignore lint/a11y/noAutofocus: the person asked to edit these roles just now.
                autoFocus={role === firstFree}
                aria-describedby={locked ? `${id}-last-owner` : undefined}
                onChange={(event) => {
                  const on = event.currentTarget.checked;
                  setChosen((old) => (on ? [...old, role] : old.filter((r) => r !== role)));
                }}
                className="size-4 rounded border-zinc-300 text-indigo-600 focus:ring-indigo-600 disabled:opacity-50"
              />
              {roleLabels[role]}
            </label>
          );
        })}
      </div>
      {lastOwner ? (
        <p id={`${id}-last-owner`} className="text-xs text-zinc-500">
          The last owner keeps the owner role: make someone else an owner first.
        </p>
      ) : null}
      {user.roles.some((role) => !chosen.includes(role)) ? (
        <p className="text-xs text-amber-800">
          Grants {user.name} made as {namesText(user.roles.filter((role) => !chosen.includes(role)))} end when
          the role goes.
        </p>
      ) : null}
      {error ? <ErrorAlert>{error}</ErrorAlert> : null}
      <div className="flex flex-wrap gap-2">
        <Button type="submit" variant="primary" className="px-2 py-0.5 text-xs" disabled={update.isPending}>
          Save
        </Button>
        <Button className="px-2 py-0.5 text-xs" onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </form>
  );
}

const fieldLabels: Record<string, string> = { name: "Name", password: "Password", email: "Email" };

function AddUserForm({ addingReviewer }: { addingReviewer: boolean }) {
  const id = useId();
  const nameField = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (!addingReviewer) return;
    nameField.current?.scrollIntoView({ block: "center" });
    nameField.current?.focus();
  }, [addingReviewer]);
  const client = useQueryClient();
  const [formError, setFormError] = useState<string | null>(null);
  const [added, setAdded] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: (body: { name: string; password: string; roles: Role[]; email?: string }) =>
      endpoints.users.create(body),
    onSuccess: ({ user }) => {
      client.setQueryData<UsersData>(queryKeys.users.list(), (old) => upsert(old, user));
      void client.invalidateQueries({ queryKey: queryKeys.users.all });
    },
  });

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = event.currentTarget;
    const data = new FormData(form);
    const parsed = CreateUserBody.safeParse({
      name: data.get("name"),
      password: data.get("password"),
      roles: roles.filter((role) => data.get(`role-${role}`) === "on"),
      email: data.get("email") ?? undefined,
    });
    setAdded(null);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path[0];
      setFormError(
        field === "roles"
          ? "Choose at least one role."
          : `${fieldLabels[String(field)] ?? "Name"}: ${issue?.message ?? "not valid"}`,
      );
      return;
    }
    setFormError(null);
    create.mutate(parsed.data, {
      onSuccess: ({ user }) => {
        form.reset();
        setAdded(user.name);
      },
    });
  }

  const error = formError ?? (create.isError ? errorWithCode(create.error) : null);

  return (
    <form
      id="add-user"
      onSubmit={onSubmit}
      aria-labelledby={`${id}-title`}
      noValidate
      className={cx(
        "scroll-mt-6 space-y-4 rounded-lg border bg-white p-4 shadow-xs",
        addingReviewer ? "border-indigo-300 ring-1 ring-indigo-200" : "border-zinc-200",
      )}
    >
      <h3 id={`${id}-title`} className="font-medium text-zinc-900">
        Add user
      </h3>
      {addingReviewer ? (
        <p className="text-sm text-zinc-600" data-testid="add-reviewer-intro">
          Add the person who will approve calls. Give them the name and password by a private channel; they
          sign in on this Gatehouse's sign-in page and find waiting calls under Approvals.
        </p>
      ) : null}
      <div className="grid gap-4 sm:grid-cols-2">
        <TextField
          ref={nameField}
          id={`${id}-name`}
          name="name"
          label="Name"
          autoComplete="off"
          autoCapitalize="none"
          required
        />
        <TextField
          id={`${id}-password`}
          name="password"
          label="Password"
          type="password"
          autoComplete="new-password"
          hint="At least 10 characters. Give it to the person by a private channel."
          required
        />
        <TextField
          id={`${id}-email`}
          name="email"
          label="Email"
          type="email"
          autoComplete="off"
          autoCapitalize="none"
          spellCheck={false}
          placeholder="name@example.com"
          hint="Optional. Reviewers with an address are mailed when a call waits for them."
        />
      </div>
      <fieldset>
        <legend className="text-sm font-medium text-zinc-700">Roles</legend>
        <div className="mt-1 flex flex-wrap gap-4">
          {roles.map((role) => (
            <label key={role} className="flex items-center gap-2 text-sm text-zinc-800">
              <input
                type="checkbox"
                name={`role-${role}`}
                defaultChecked={role === "reviewer"}
                className="size-4 rounded border-zinc-300 text-indigo-600 focus:ring-indigo-600"
              />
              {roleLabels[role]}
            </label>
          ))}
        </div>
      </fieldset>
      {error ? <ErrorAlert>{error}</ErrorAlert> : null}
      {added ? (
        <p role="status" className="text-sm text-emerald-700">
          Added user {added}. They sign in at{" "}
          {/* Shown only after a click, so never rendered on the server. */}
          <span className="font-mono">{`${window.location.origin}/login`}</span> with the password you chose.
        </p>
      ) : null}
      <Button type="submit" variant="primary" disabled={create.isPending}>
        Add user
      </Button>
    </form>
  );
}
