import Link from "next/link";
import { type DecisionSource, decisionSourceText } from "@/components/grant-text";
import { cx } from "@/components/ui";

const linkClass = "font-medium text-indigo-700 hover:underline";

/**
 * One phrase naming what decided a call without (or before) a person: "allowed by rule
 * notes-reads", "denied by rule no-drop", "held by rule payments (2 approvals)", or "ran under a
 * grant from alice" with a link to /grants. The rule's name is set in monospace.
 */
export function DecisionSourceText({
  source,
  grantBy,
  capitalized = false,
  className,
}: {
  source: DecisionSource;
  /** Who made the grant, when known. */
  grantBy?: string | null;
  /** Start with a capital letter (a sentence of its own). */
  capitalized?: boolean;
  className?: string;
}) {
  const text = decisionSourceText(source, grantBy);
  const cap = (words: string) => (capitalized ? words.charAt(0).toUpperCase() + words.slice(1) : words);
  if (source.kind === "grant") {
    return (
      <span className={className} data-testid="decision-source">
        {cap("ran under ")}
        <Link href="/grants" className={linkClass}>
          {text.slice("ran under ".length)}
        </Link>
      </span>
    );
  }
  // The rule's name set apart: the text is "<verb> by rule <name>[ (n approvals)]".
  const lead = `${source.kind} by rule `;
  return (
    <span className={cx(className)} data-testid="decision-source">
      {cap(lead)}
      <code className="font-mono text-[0.8125rem] text-zinc-900">{source.rule}</code>
      {text.slice(lead.length + source.rule.length)}
    </span>
  );
}
