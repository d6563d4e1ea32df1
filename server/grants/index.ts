/**
 * Grants (PRODUCT.md §11): a reviewer's "and let the same requester call this tool without
 * review for a while". This room owns the `grants` table: making grants, covering calls with
 * them, listing and ending them. It imports only the store (and lib): the broker hands it the
 * arguments digest, and server/auth calls {@link endGrants} when a token or a role goes.
 */
export {
  type CoverQuery,
  createGrant,
  describeGrant,
  findCoveringGrant,
  type GrantRow,
  type NewGrant,
  takeGrant,
} from "./cover";
export {
  endGrants,
  endGrantsForChanges,
  type GrantEndingChange,
  type GrantEndingScope,
  revokeGrant,
} from "./endings";
export { ENDED_GRANTS_LISTED, type GrantStanding, grantView, listGrants, readGrantView } from "./views";
