import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { endpoints } from "@/lib/endpoints";
import { queryKeys } from "@/lib/query-keys";

/**
 * "Try" for an owner: sends `POST /api/calls` as the signed-in person (the same path, checks and
 * confirm flow as an agent's call) and follows the call it created. A destructive try stays
 * pending until another reviewer decides; live call events refresh it, nothing polls.
 */
export function useTryTool(tool: string) {
  const client = useQueryClient();
  const [callId, setCallId] = useState<string | null>(null);

  const send = useMutation({
    mutationFn: (args: Record<string, unknown>) => endpoints.calls.request({ tool, arguments: args }),
    onMutate: () => setCallId(null),
    onSuccess: (call) => {
      client.setQueryData(queryKeys.calls.one(call.id), call);
      setCallId(call.id);
      // The approvals queue and the activity list have a new call.
      void client.invalidateQueries({ queryKey: queryKeys.calls.all, refetchType: "active" });
    },
  });

  const followed = useQuery({
    queryKey: queryKeys.calls.one(callId ?? ""),
    queryFn: ({ signal }) => endpoints.calls.get(callId ?? "", { signal }),
    enabled: callId !== null,
  });

  return {
    /** Sends the call; a refusal (bad arguments, tool not callable) lands in `error`. */
    send: (args: Record<string, unknown>) => send.mutate(args),
    sending: send.isPending,
    error: send.error,
    /** The call as it now stands, once sent. */
    call: callId ? (followed.data ?? null) : null,
    reset: () => {
      send.reset();
      setCallId(null);
    },
  };
}
