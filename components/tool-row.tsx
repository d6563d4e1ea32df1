import { memo, useId } from "react";
import { useAnnounceEnabled } from "@/components/enabled-notice";
import { ToolDetails } from "@/components/tool-details";
import { TryTool } from "@/components/try-tool";
import { Badge, type BadgeTone, Button, ErrorAlert } from "@/components/ui";
import { selectable } from "@/components/use-tool-selection";
import { useUpdateTool } from "@/components/use-update-tool";
import type { CatalogueToolView, ToolStatus } from "@/lib/api-types";
import { errorWithCode, formatDateTime } from "@/lib/format";

const statusTones: Record<ToolStatus, BadgeTone> = { proposed: "blue", enabled: "green", disabled: "grey" };

/** Long enough that three lines of a column this wide may not hold it. */
const LONG_DESCRIPTION = 160;
const GONE_REASON = "its server no longer lists it";

function KindCell({ tool }: { tool: CatalogueToolView }) {
  const vouched = tool.vouch ? `vouched by ${tool.vouch.by}` : null;
  if (tool.readOnlyBy && tool.alwaysConfirm) {
    return (
      <>
        <Badge tone="amber" title="Read-only, but the owner requires every call to be confirmed">
          always confirm
        </Badge>
        <span
          className="mt-1 block text-xs text-zinc-500"
          title={tool.vouch ? formatDateTime(tool.vouch.at) : undefined}
        >
          read-only{vouched ? `, ${vouched}` : ""}
        </span>
      </>
    );
  }
  if (tool.readOnlyBy) {
    return (
      <>
        <Badge tone="grey">read-only</Badge>
        {vouched ? (
          <span
            className="mt-1 block break-words text-xs text-emerald-800"
            title={`vouched ${formatDateTime(tool.vouch?.at)}; dropped if the definition changes`}
          >
            {vouched}
          </span>
        ) : null}
      </>
    );
  }
  return (
    <>
      <Badge tone="red">destructive</Badge>
      {tool.approvalReason ? (
        <span className="mt-1 block text-xs text-zinc-500">{tool.approvalReason}</span>
      ) : null}
    </>
  );
}

/** One tool of the table, and its details row below it while expanded. */
export const ToolRow = memo(function ToolRow({
  tool,
  selected,
  expanded,
  onSelect,
  onExpand,
}: {
  tool: CatalogueToolView;
  selected: boolean;
  expanded: boolean;
  onSelect: (name: string, on: boolean) => void;
  onExpand: (name: string) => void;
}) {
  const reasonId = useId();
  const detailsId = useId();
  const update = useUpdateTool(tool.localName);
  const announceEnabled = useAnnounceEnabled();

  const unusableReason = tool.unusableReason ?? "this tool cannot be called";
  // The API refuses to enable these; say why next to the disabled button instead of failing on click.
  const cannotEnable =
    tool.availability === "unusable" ? unusableReason : tool.availability === "gone" ? GONE_REASON : null;
  const long = tool.description.length > LONG_DESCRIPTION || tool.description.split("\n").length > 3;

  return (
    <>
      <tr
        data-testid={`tool-${tool.localName}`}
        className={selected ? "bg-indigo-50/60" : expanded ? "bg-zinc-50/70" : "hover:bg-zinc-50/60"}
      >
        <td className="px-3 py-2 align-top">
          {selectable(tool) ? (
            <input
              type="checkbox"
              aria-label={`Select ${tool.localName}`}
              checked={selected}
              onChange={(e) => onSelect(tool.localName, e.target.checked)}
              className="mt-0.5 size-4 rounded border-zinc-300 accent-indigo-600"
            />
          ) : null}
        </td>
        <td className="px-3 py-2 align-top">
          <span
            className={`block break-all font-mono text-[0.8125rem] text-zinc-900 ${expanded ? "" : "line-clamp-3"}`}
            title={tool.localName}
          >
            {tool.localName}
          </span>
          {tool.title ? (
            <span
              className={`mt-0.5 block break-words text-xs text-zinc-600 ${expanded ? "" : "line-clamp-2"}`}
            >
              {tool.title}
            </span>
          ) : null}
        </td>
        <td className="px-3 py-2 align-top">
          <span className="block break-all font-mono text-[0.8125rem] text-zinc-700">{tool.server}</span>
        </td>
        <td className="px-3 py-2 align-top">
          <KindCell tool={tool} />
        </td>
        <td className="px-3 py-2 align-top">
          <Badge tone={statusTones[tool.status]}>{tool.status}</Badge>
        </td>
        <td className="px-3 py-2 align-top">
          {tool.availability === "ok" ? (
            <span className="text-zinc-400">ok</span>
          ) : tool.availability === "changed" ? (
            <>
              <Badge
                tone="amber"
                title="The server changed this tool's definition; it cannot be called until reviewed"
              >
                changed
              </Badge>
              <span className="mt-1 block text-xs text-zinc-500">not callable until reviewed</span>
            </>
          ) : tool.availability === "gone" ? (
            <>
              <Badge tone="grey">gone</Badge>
              <span id={reasonId} className="mt-1 block text-xs text-zinc-500">
                {GONE_REASON}
              </span>
            </>
          ) : (
            <span id={reasonId} className="block break-words text-rose-700">
              unusable: {unusableReason}
            </span>
          )}
        </td>
        <td className="px-3 py-2 align-top">
          {tool.description ? (
            <p className={`whitespace-pre-line break-words text-zinc-700 ${expanded ? "" : "line-clamp-3"}`}>
              {tool.description}
            </p>
          ) : (
            <span className="text-zinc-400">No description</span>
          )}
          {long && !expanded ? (
            <button
              type="button"
              onClick={() => onExpand(tool.localName)}
              className="mt-1 text-xs font-medium text-indigo-700 hover:underline"
            >
              Show more
            </button>
          ) : null}
        </td>
        <td className="px-3 py-2 align-top">
          <div className="flex flex-col items-start gap-1.5">
            {tool.availability === "changed" ? (
              <Button
                variant="primary"
                className="whitespace-nowrap"
                aria-expanded={expanded}
                aria-controls={detailsId}
                onClick={() => onExpand(tool.localName)}
              >
                {expanded ? "Hide change" : "Review change"}
              </Button>
            ) : tool.status === "enabled" ? (
              <Button
                variant="secondary"
                disabled={update.isPending}
                onClick={() => update.mutate({ status: "disabled" })}
              >
                Disable
              </Button>
            ) : (
              <>
                <Button
                  variant="primary"
                  disabled={update.isPending || cannotEnable !== null}
                  aria-describedby={cannotEnable ? reasonId : undefined}
                  title={cannotEnable ? `Cannot be enabled: ${cannotEnable}` : undefined}
                  onClick={() =>
                    update.mutate(
                      { status: "enabled", expectedHash: tool.definitionHash },
                      { onSuccess: ({ tool: enabled }) => announceEnabled([enabled]) },
                    )
                  }
                >
                  Enable
                </Button>
                {cannotEnable ? <span className="text-xs text-zinc-500">Cannot be enabled</span> : null}
              </>
            )}
            <TryTool tool={tool} />
            {tool.availability !== "changed" ? (
              <button
                type="button"
                aria-expanded={expanded}
                aria-controls={detailsId}
                onClick={() => onExpand(tool.localName)}
                className="text-xs font-medium text-indigo-700 hover:underline"
              >
                {expanded ? "Hide details" : "Details"}
                <span className="sr-only"> of {tool.localName}</span>
              </button>
            ) : null}
            {update.isError ? (
              <ErrorAlert className="px-2 py-1 text-xs">{errorWithCode(update.error)}</ErrorAlert>
            ) : null}
          </div>
        </td>
      </tr>
      {expanded ? (
        <tr id={detailsId} data-testid={`details-${tool.localName}`} className="bg-zinc-50/70">
          <td colSpan={8} className="border-l-4 border-indigo-200 px-4 pt-1 pb-5">
            <ToolDetails tool={tool} />
          </td>
        </tr>
      ) : null}
    </>
  );
});
