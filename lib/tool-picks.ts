/**
 * Which of the tools an owner picked for a bulk enable still count as picked: those whose
 * definition hash is still the one they had when picked. A tool its server changed since (while
 * its row was filtered or paged out of view, say) drops out, so a bulk enable never pins a
 * version the owner did not see when choosing it.
 * @param picked name → definition hash at the moment it was picked
 * @param current name → definition hash now (names no longer listed are absent)
 */
export function stillPicked(
  picked: ReadonlyMap<string, string>,
  current: ReadonlyMap<string, { definitionHash: string }>,
): ReadonlySet<string> {
  const out = new Set<string>();
  for (const [name, hash] of picked) if (current.get(name)?.definitionHash === hash) out.add(name);
  return out;
}
