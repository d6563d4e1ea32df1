import type { ServerCapView } from "@/lib/api-types";
import { plural } from "@/lib/format";

/** Names shown before the rest of a long over-cap list folds away. */
const SHOWN = 12;

/**
 * A server's `maxTools` where it bites: the tools it lists beyond the cap, by name (agents calling
 * one are told the same hint), and a warning when the cap was lowered below the enabled count.
 * Nothing when neither applies.
 */
export function ServerCap({ name, cap, line }: { name: string; cap: ServerCapView; line: number | null }) {
  const names = cap.overCapTools;
  if (names.length === 0 && cap.warning === null) return null;
  const nameList = (list: readonly string[]) => (
    <ul className="mt-1 flex flex-wrap gap-1">
      {list.map((tool) => (
        <li
          key={tool}
          className="max-w-full break-all rounded bg-white px-1.5 py-0.5 font-mono text-xs text-amber-950 ring-1 ring-inset ring-amber-200"
        >
          {tool}
        </li>
      ))}
    </ul>
  );
  return (
    <div
      className="rounded-md border border-amber-200 bg-amber-50 px-3 py-2 text-sm"
      data-testid="server-cap"
    >
      {names.length > 0 ? (
        <>
          <p className="font-medium text-amber-800">
            {plural(names.length, "tool")} over the cap of {cap.maxTools}: listed by the server, not offered
          </p>
          {nameList(names.slice(0, SHOWN))}
          {names.length > SHOWN ? (
            <details className="mt-1">
              <summary className="cursor-pointer select-none text-xs font-medium text-amber-800">
                and {names.length - SHOWN} more
              </summary>
              {/* A server may list hundreds: the rest scrolls rather than stretching the card. */}
              <div className="max-h-48 overflow-auto">{nameList(names.slice(SHOWN))}</div>
            </details>
          ) : null}
          <p className="mt-1.5 break-words text-amber-900">
            To offer one, raise <code className="font-mono">"maxTools"</code> (now {cap.maxTools}) in this
            entry and restart Gatehouse, then enable the tool.
          </p>
          {cap.entryAt ? (
            <p className="mt-0.5 break-all font-mono text-xs text-amber-950">
              {cap.entryAt}
              {/* Rebuilt from the name, like the dark note's: the file's own line may hold secrets. */}
              {line === null ? null : `: ${JSON.stringify(name)}: {`}
            </p>
          ) : null}
        </>
      ) : null}
      {cap.warning ? (
        <p className={`break-words text-amber-900 ${names.length > 0 ? "mt-2" : ""}`}>
          <span className="font-medium text-amber-800">Cap below the enabled tools: </span>
          {cap.warning}
        </p>
      ) : null}
    </div>
  );
}
