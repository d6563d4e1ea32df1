"use client";

import { useMutation } from "@tanstack/react-query";
import { Button, ErrorAlert } from "@/components/ui";
import type { ServerView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime } from "@/lib/format";

/**
 * "Switch on" / "Switch off" for a server whose entry has no `enabled` key: the owner's switch,
 * kept by Gatehouse across restarts. The file's own `"enabled"` wins when it is there, so a server
 * whose entry says it shows nothing here (the dark note says where to change it).
 */
export function ServerSwitch({
  server,
  onUpdated,
}: {
  server: ServerView;
  onUpdated: (s: ServerView) => void;
}) {
  const toggle = useMutation({
    mutationFn: (on: boolean) => endpoints.servers.switch(server.name, on),
    onSuccess: ({ server: updated }) => onUpdated(updated),
  });
  const view = server.switch;
  if (view === null) return null;
  const code = (text: string) => <code className="font-mono">{text}</code>;
  const fileWins = <>An {code('"enabled"')} key in gatehouse.json wins over this switch when it is there.</>;
  const error = toggle.isError ? (
    <ErrorAlert className="mt-2">{errorWithCode(toggle.error)}</ErrorAlert>
  ) : null;

  if (server.enabled && view.switchedOn) {
    return (
      <div className="rounded-md border border-sky-200 bg-sky-50 px-3 py-2 text-sm text-sky-950">
        <p>
          Switched on here by <span className="font-medium">{view.switchedOn.by}</span>,{" "}
          {formatDateTime(view.switchedOn.at)}: Gatehouse remembers it across restarts. {fileWins}
        </p>
        <Button className="mt-2" onClick={() => toggle.mutate(false)} disabled={toggle.isPending}>
          Switch off
        </Button>
        {error}
      </div>
    );
  }
  if (server.enabled) return null;
  if (view.refusal) {
    return <p className="break-words text-sm text-rose-800">Cannot be switched on here: {view.refusal}.</p>;
  }
  return (
    <div className="text-sm text-zinc-600">
      <p>Or switch it on here: Gatehouse dials it at once and remembers it across restarts. {fileWins}</p>
      <Button
        variant="primary"
        className="mt-2"
        onClick={() => toggle.mutate(true)}
        disabled={toggle.isPending}
      >
        Switch on
      </Button>
      {error}
    </div>
  );
}
