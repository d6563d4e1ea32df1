/** See conformance-judge.mjs. */
export type Outcome = "passed" | "expected" | "unexpected" | "stale";

/** One entry of the suite's checks.json (the fields the judging reads). */
export interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

export interface Exclusion {
  reason: string | null;
  checks: Map<string, string>;
}

export interface Row {
  scenario: string;
  outcome: Outcome;
  scored: boolean;
  notScored?: string;
  reason: string | null;
  checks: number;
  failing: string[];
  note?: string;
}

export interface Counts {
  passed: number;
  expectedFailures: number;
  unexpectedFailures: number;
  stale: number;
}

export function parseExpected(
  text: string,
  revisions: string[],
  file: string,
): Map<string, Map<string, Exclusion>>;

export function judge(
  scenario: string,
  checks: Check[] | undefined,
  exclusion: Exclusion | undefined,
  notScored: string | null,
): Row;

export function judgeRun(run: {
  revision: string;
  requirements: { server: string[]; notScored: Map<string, string> };
  results: Map<string, Check[]>;
  exclusions: Map<string, Exclusion>;
  planned: number;
  suiteLog: string;
}): Row[];

export function tally(rows: Row[]): Counts & { scored: Counts; notScored: Counts };
