import { Section } from "@/components/ui";

/** The config's `approvals` section, as the settings page shows it. */
export interface ApprovalSettingsView {
  expireAfterSeconds: number;
  waitSeconds: number;
  selfApproval: boolean;
}

function seconds(n: number): string {
  if (n % 3600 === 0 && n >= 3600) return `${n / 3600} h`;
  if (n % 60 === 0 && n >= 60) return `${n / 60} min`;
  return `${n} s`;
}

/**
 * The approval policy in force, read-only: it lives in gatehouse.json, so the section says which
 * key holds each value and that a change takes a restart. Hints about self-approval link here
 * (`#approval-settings`).
 */
export function ApprovalSettings({ settings }: { settings: ApprovalSettingsView }) {
  const rows: { key: string; value: string; meaning: string }[] = [
    {
      key: "approvals.selfApproval",
      value: String(settings.selfApproval),
      meaning: settings.selfApproval
        ? "A person may approve a call they requested themselves, when it needs one approval and no rule held it."
        : "Nobody approves a call they requested themselves: another reviewer has to.",
    },
    {
      key: "approvals.expireAfterSeconds",
      value: String(settings.expireAfterSeconds),
      meaning: `A call nobody decides expires after ${seconds(settings.expireAfterSeconds)}.`,
    },
    {
      key: "approvals.waitSeconds",
      value: String(settings.waitSeconds),
      meaning: `An agent's MCP call waits up to ${seconds(settings.waitSeconds)} for a decision before it is told the call is pending.`,
    },
  ];
  return (
    <div id="approval-settings" className="scroll-mt-6">
      <Section
        title="Approval settings"
        description={
          <>
            Set in the <code className="font-mono">approvals</code> section of gatehouse.json; a change takes
            effect when Gatehouse restarts.
          </>
        }
      >
        <dl className="divide-y divide-zinc-100 rounded-lg border border-zinc-200 bg-white text-sm shadow-xs">
          {rows.map((row) => (
            <div key={row.key} className="grid gap-1 px-4 py-3 sm:grid-cols-[16rem_6rem_1fr] sm:gap-4">
              <dt className="font-mono text-zinc-900">{row.key}</dt>
              <dd className="font-mono text-zinc-700" data-testid={`setting-${row.key}`}>
                {row.value}
              </dd>
              <dd className="text-zinc-600">{row.meaning}</dd>
            </div>
          ))}
        </dl>
      </Section>
    </div>
  );
}
