import { describe, expect, it } from "vitest";
import { globMatches } from "./glob";

/** Globs on local tool names, row by row: `*` any run (none included), `?` exactly one character. */
const ROWS: [glob: string, name: string, matches: boolean][] = [
  ["db_query", "db_query", true],
  ["db_query", "db_query2", false],
  ["db_query", "xdb_query", false],
  ["db_*", "db_query", true],
  ["db_*", "db_", true],
  ["db_*", "db", false],
  ["db_*", "files_db_query", false],
  ["*_query", "db_query", true],
  ["*_query", "db_query_all", false],
  ["*", "anything", true],
  ["*", "", true],
  ["files_read_?", "files_read_x", true],
  ["files_read_?", "files_read_", false],
  ["files_read_?", "files_read_xy", false],
  ["?", "a", true],
  ["?", "", false],
  ["a*b*c", "abc", true],
  ["a*b*c", "a_x_b_y_c", true],
  ["a*b*c", "a_x_c_y_b", false],
  ["*a*", "banana", true],
  ["**", "x", true],
  ["*?", "", false],
  ["*?", "x", true],
  ["DB_*", "db_query", false],
  ["db.*", "db.x", true],
  ["db.*", "dbxx", false],
];

describe("globMatches", () => {
  for (const [glob, name, matches] of ROWS) {
    it(`${JSON.stringify(glob)} ${matches ? "matches" : "does not match"} ${JSON.stringify(name)}`, () => {
      expect(globMatches(glob, name)).toBe(matches);
    });
  }

  it("a glob of many stars against a long name that almost matches answers (no exponential backtracking)", () => {
    const glob = `${"*a".repeat(30)}b`;
    expect(globMatches(glob, "a".repeat(64))).toBe(false);
    expect(globMatches(glob, `${"a".repeat(63)}b`)).toBe(true);
  });
});
