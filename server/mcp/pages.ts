import "server-only";

/**
 * Follows `nextCursor` through a paginated MCP list, bounded: at most `maxPages` requests and,
 * when given, `maxItems` items (a server that never stops paging cannot keep us listening).
 */
export async function collectPages<T>(
  fetchPage: (params: { cursor: string } | undefined) => Promise<{ items: T[]; nextCursor?: string }>,
  limits: { maxPages: number; maxItems?: number },
): Promise<T[]> {
  const maxItems = limits.maxItems ?? Number.POSITIVE_INFINITY;
  const items: T[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < limits.maxPages && items.length < maxItems; page++) {
    const res = await fetchPage(cursor ? { cursor } : undefined);
    items.push(...res.items.slice(0, maxItems - items.length));
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return items;
}
