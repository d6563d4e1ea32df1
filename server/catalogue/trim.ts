/**
 * Stable trimming: which listed tools get a catalogue row.
 *
 * Tools the server lists now that already have a row keep it, whatever else the server lists
 * (even when that puts the server over `maxTools`, as after the cap was lowered); new tools fill
 * the slots left under `maxTools` in name order; the rest are "over the cap". A row whose tool is
 * gone, or that `allowTools` now leaves out, holds no slot: it is not among `listed`. The result
 * does not depend on the order the server lists tools in.
 */
export interface TrimInput {
  /** Remote names the server listed now (after `allowTools` filtering). */
  listed: readonly string[];
  /** Remote names that already have a row (any status, listed now or not). */
  existing: ReadonlySet<string>;
  maxTools: number;
}

export interface TrimResult {
  /** Listed names that already had a row. */
  kept: string[];
  /** Listed names that get a new row. */
  admitted: string[];
  /** Listed names refused for lack of room. */
  overCap: string[];
}

export function trimTools({ listed, existing, maxTools }: TrimInput): TrimResult {
  const unique = [...new Set(listed)].sort();
  const kept = unique.filter((n) => existing.has(n));
  const fresh = unique.filter((n) => !existing.has(n));
  const room = Math.max(0, maxTools - kept.length);
  return { kept, admitted: fresh.slice(0, room), overCap: fresh.slice(room) };
}
