import { Badge, type BadgeTone } from "@/components/ui";
import type { ServerState } from "@/lib/api-types";

/** Each connection state has its own colour, so a glance down the list finds the broken ones. */
const tones: Record<ServerState, BadgeTone> = {
  dark: "slate",
  connecting: "blue",
  ready: "green",
  backoff: "amber",
  failed: "red",
  closed: "red",
};

export function ServerStateBadge({ state }: { state: ServerState }) {
  return <Badge tone={tones[state]}>{state}</Badge>;
}
