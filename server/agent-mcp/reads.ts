import "server-only";
import type { ResourceReadsPage, ResourceReadView } from "@/lib/api-types";
import { SERVER_NAME_PATTERN } from "../config";
import { type AuditRow, listAuditByActions } from "../store/audit";
import type { Db } from "../store/db";

/**
 * Agents' resource reads and prompt gets through `/mcp` as owners and reviewers see them: the
 * audit rows resources.ts and prompts.ts write, one per read, get or refusal, turned into views.
 * A read is no call, so it has no row of its own; the audit row is the record.
 */

/** The audit actions of resources.ts: a read passed to its server, and a refusal. */
const READ_ACTION = "resource.read";
const REFUSED_ACTION = "resource.refused";
/** The audit actions of prompts.ts: a get passed to its server, and a refusal. */
const GET_ACTION = "prompt.get";
const PROMPT_REFUSED_ACTION = "prompt.refused";
/** A page's size when none is asked for. */
export const RESOURCE_READS_DEFAULT_LIMIT = 50;
/** The most reads one page holds. */
export const RESOURCE_READS_MAX_LIMIT = 200;
/**
 * resources.ts's words for a refused URI that names no server. Its audit subject is then the
 * URI as sent, not `<server> <uri>`, so it must not be split: an agent could send
 * `files file:///etc/passwd` as a URI to make its refusal look like one of the files server.
 */
const NOT_OURS_DETAIL = "not a gatehouse://<server>/<uri> URI";
/** prompts.ts's words for a refused prompt name that names no server: its subject is the name as sent. */
const NOT_OURS_PROMPT_DETAIL = "not a <server>_<prompt> name";

/** A row's subject, `<server> <original URI or prompt name>`, split back into its parts. */
function target(row: AuditRow): { server: string | null; uri: string } {
  if (row.action === REFUSED_ACTION && row.detail === NOT_OURS_DETAIL)
    return { server: null, uri: row.subject };
  if (row.action === PROMPT_REFUSED_ACTION && row.detail === NOT_OURS_PROMPT_DETAIL)
    return { server: null, uri: row.subject };
  const space = row.subject.indexOf(" ");
  const server = space > 0 ? row.subject.slice(0, space) : "";
  if (!SERVER_NAME_PATTERN.test(server)) return { server: null, uri: row.subject };
  return { server, uri: row.subject.slice(space + 1) };
}

function view(row: AuditRow): ResourceReadView {
  return {
    id: row.id,
    at: row.at,
    agent: row.actor,
    kind: row.action === GET_ACTION || row.action === PROMPT_REFUSED_ACTION ? "prompt" : "resource",
    ...target(row),
    allowed: row.action === READ_ACTION || row.action === GET_ACTION,
    detail: row.detail,
    durationMs: row.durationMs,
  };
}

/**
 * One page of resource reads, prompt gets and their refusals through `/mcp`, newest first. `limit`: default
 * {@link RESOURCE_READS_DEFAULT_LIMIT}, clamped to 1..{@link RESOURCE_READS_MAX_LIMIT};
 * `before`: a read's id, for the page of older ones (the previous page's `nextBefore`), which is
 * null only when no older read exists.
 */
export async function listResourceReads(
  db: Db,
  params: { limit?: number | undefined; before?: number | undefined } = {},
): Promise<ResourceReadsPage> {
  const limit = Math.min(
    RESOURCE_READS_MAX_LIMIT,
    Math.max(1, Math.trunc(params.limit ?? RESOURCE_READS_DEFAULT_LIMIT)),
  );
  // One row more than asked: whether an older page exists, without a count.
  const rows = await listAuditByActions(db, {
    actions: [READ_ACTION, REFUSED_ACTION, GET_ACTION, PROMPT_REFUSED_ACTION],
    limit: limit + 1,
    beforeId: params.before,
  });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { reads: page.map(view), nextBefore: rows.length > limit && last ? last.id : null };
}
