import "server-only";

/**
 * Whether `glob` matches the whole of `name`: `*` matches any run of characters (none
 * included), `?` exactly one, every other character itself (case-sensitive, as local names are).
 * Greedy with one backtrack point, so the cost is at most |glob|·|name|, never exponential.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    const c = glob[g];
    if (c === "*") {
      star = g++;
      resume = n;
    } else if (c !== undefined && (c === "?" || c === name[n])) {
      g++;
      n++;
    } else if (star >= 0) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (glob[g] === "*") g++;
  return g === glob.length;
}

/** Whether any of `globs` matches `name`. */
export function anyGlobMatches(globs: readonly string[], name: string): boolean {
  return globs.some((glob) => globMatches(glob, name));
}
