import Link from "next/link";
import { GatehouseError } from "@/lib/errors";

/** Whether a call's story answered that there is no such call (an unknown or mistyped id). */
export function isCallNotFound(error: unknown): boolean {
  return error instanceof GatehouseError && (error.code === "call_not_found" || error.code === "not_found");
}

/**
 * What `/approvals/<id>` and `/activity/<id>` show for an id this Gatehouse has no call of: said
 * plainly, with the id as text, and a way on (`back`: the list the page belongs to).
 */
export function NoSuchCall({ id, back }: { id: string; back: { href: string; label: string } }) {
  return (
    <section
      aria-labelledby="no-such-call"
      className="rounded-lg border border-dashed border-zinc-300 bg-white px-6 py-10 text-center"
    >
      <h2 id="no-such-call" className="text-lg font-semibold text-zinc-900">
        No such call
      </h2>
      <p className="mx-auto mt-2 max-w-xl break-all text-sm text-zinc-600">
        This Gatehouse has no call <span className="font-mono text-zinc-800">{id}</span>.
      </p>
      <p className="mt-1 text-sm text-zinc-600">
        The link may be mistyped or cut short, or come from another Gatehouse.
      </p>
      <Link
        href={back.href}
        className="mt-4 inline-block text-sm font-medium text-indigo-700 hover:underline"
      >
        {back.label}
      </Link>
    </section>
  );
}
