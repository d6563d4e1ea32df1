import { Badge, type BadgeTone } from "@/components/ui";
import type { ServerState } from "@/lib/api-types";

/**
 * Each connection state has its own colour, so a glance down the list finds the broken ones.
 * `needs_auth` is violet, not red: the server is waiting for an owner to sign in, not broken.
 */
const tones: Record<ServerState, BadgeTone> = {
  dark: "slate",
  connecting: "blue",
  ready: "green",
  backoff: "amber",
  failed: "red",
  needs_auth: "violet",
  closed: "red",
};

const titles: Partial<Record<ServerState, string>> = {
  needs_auth: "Waiting for an owner to sign in (Connect)",
};

export function ServerStateBadge({ state }: { state: ServerState }) {
  return (
    <Badge tone={tones[state]} title={titles[state]}>
      {state}
    </Badge>
  );
}
