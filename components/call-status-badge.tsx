import { Badge, type BadgeTone } from "@/components/ui";
import type { CallStatus } from "@/lib/api-types";

const tones: Record<CallStatus, BadgeTone> = {
  pending: "blue",
  running: "violet",
  succeeded: "green",
  failed: "red",
  denied: "red",
  refused: "grey",
  expired: "grey",
  interrupted: "amber",
  withdrawn: "grey",
};

export function CallStatusBadge({ status }: { status: CallStatus }) {
  return <Badge tone={tones[status]}>{status}</Badge>;
}
