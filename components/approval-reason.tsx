/** What each approval reason means, for reviewers who do not know MCP's annotations by heart. */
const MEANINGS: Record<string, string> = {
  "no readOnlyHint": "its server does not say it only reads, so Gatehouse treats it as able to change things",
  "readOnlyHint: false": "its server says it changes things",
  "destructiveHint: true": "its server says it may destroy or overwrite data",
  "owner requires confirmation": "an owner asked for every call of this tool to be confirmed",
};

/**
 * "Needs approval: no readOnlyHint — its server does not say ...". Unknown reasons are shown as
 * they are. A rule's reason is the owner's own sentence (`byRule`): plain text, not a code.
 */
export function ApprovalReason({ reason, byRule = false }: { reason: string; byRule?: boolean }) {
  const meaning = MEANINGS[reason];
  if (byRule) {
    return (
      <p className="text-sm text-zinc-700">
        <span className="font-medium text-zinc-900">Needs approval:</span> {reason}
      </p>
    );
  }
  return (
    <p className="text-sm text-zinc-700">
      <span className="font-medium text-zinc-900">Needs approval:</span>{" "}
      <code className="rounded bg-amber-50 px-1 py-px font-mono text-[0.8125rem] text-amber-900 ring-1 ring-inset ring-amber-200">
        {reason}
      </code>
      {meaning ? <span className="text-zinc-600"> — {meaning}</span> : null}
    </p>
  );
}
