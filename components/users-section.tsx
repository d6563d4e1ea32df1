"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import {
  Badge,
  Button,
  EmptyState,
  ErrorAlert,
  Loading,
  Section,
  TextField,
  tableClass,
  tdClass,
  thClass,
} from "@/components/ui";
import { CreateUserBody, type Role, roles, type UserView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

type UsersData = { users: UserView[] };

const roleLabels: Record<Role, string> = { owner: "Owner", reviewer: "Reviewer" };

export function UsersSection() {
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
                  Created
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100">
              {query.data.map((user) => (
                <tr key={user.id} data-testid={`user-${user.name}`}>
                  <td className={`${tdClass} break-all font-medium text-zinc-900`}>{user.name}</td>
                  <td className={tdClass}>
                    <span className="flex flex-wrap gap-1">
                      {user.roles.map((role) => (
                        <Badge key={role} tone={role === "owner" ? "violet" : "blue"}>
                          {role}
                        </Badge>
                      ))}
                    </span>
                  </td>
                  <td className={`${tdClass} whitespace-nowrap text-zinc-600`}>
                    {formatDateTime(user.createdAt)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <AddUserForm />
    </Section>
  );
}

function AddUserForm() {
  const id = useId();
  const client = useQueryClient();
  const [formError, setFormError] = useState<string | null>(null);
  const [added, setAdded] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: (body: { name: string; password: string; roles: Role[] }) => endpoints.users.create(body),
    onSuccess: ({ user }) => {
      client.setQueryData<UsersData>(queryKeys.users.list(), (old) =>
        old ? { users: [...old.users.filter((u) => u.id !== user.id), user] } : old,
      );
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
    });
    setAdded(null);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path[0];
      setFormError(
        field === "roles"
          ? "Choose at least one role."
          : `${field === "password" ? "Password" : "Name"}: ${issue?.message ?? "not valid"}`,
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
      onSubmit={onSubmit}
      aria-labelledby={`${id}-title`}
      noValidate
      className="space-y-4 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs"
    >
      <h3 id={`${id}-title`} className="font-medium text-zinc-900">
        Add user
      </h3>
      <div className="grid gap-4 sm:grid-cols-2">
        <TextField
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
          Added user {added}.
        </p>
      ) : null}
      <Button type="submit" variant="primary" disabled={create.isPending}>
        Add user
      </Button>
    </form>
  );
}
