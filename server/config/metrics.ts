import "server-only";
import { writeRefs } from "./expand";
import { checkKeys, type Issues, type Json, readSection, reportingExpander, typeName } from "./readers";
import type { MetricsConfig } from "./types";

/** The shortest scrape token accepted: long enough that guessing it is no attack. */
export const MIN_SCRAPE_TOKEN_CHARS = 16;

const METRICS_KEYS = ["token"] as const;

/**
 * `metrics`: the scrape token `/metrics` accepts besides an owner's session, or undefined when
 * the file has none (then only owners may scrape). The token is a secret: messages name it by
 * its length and references only, never its value.
 */
export function readMetrics(
  raw: Json,
  env: Record<string, string | undefined>,
  issues: Issues,
): MetricsConfig | undefined {
  if (raw.metrics === undefined) return undefined;
  const section = readSection(raw, "metrics", "", '{"token": "${SCRAPE_TOKEN}"}', issues);
  checkKeys(section, METRICS_KEYS, "metrics", {}, issues);
  if (section.token === undefined) {
    issues.error(
      "metrics.token",
      'is required; write {"token": "${SCRAPE_TOKEN}"} and set SCRAPE_TOKEN in the environment',
    );
    return undefined;
  }
  if (typeof section.token !== "string") {
    issues.error("metrics.token", `must be a string like "\${SCRAPE_TOKEN}", not ${typeName(section.token)}`);
    return undefined;
  }
  const expand = reportingExpander(env, issues, (where, unset) => {
    issues.error(
      where,
      `refers to ${writeRefs(unset)}, which ${unset.length === 1 ? "is" : "are"} not set; set ${unset.join(", ")} in Gatehouse's environment (e.g. openssl rand -hex 24) or remove "metrics"`,
    );
  });
  const expanded = expand(section.token, "metrics.token");
  if (expanded.malformed || expanded.unset.length > 0) return undefined;
  if (expanded.value.length < MIN_SCRAPE_TOKEN_CHARS) {
    issues.error(
      "metrics.token",
      `is ${expanded.value.length} characters long; use at least ${MIN_SCRAPE_TOKEN_CHARS} random ones (e.g. openssl rand -hex 24)`,
    );
    return undefined;
  }
  if (expanded.names.length === 0) {
    issues.warn(
      "metrics.token",
      'is written in the file itself; keep it in the environment instead, as "${SCRAPE_TOKEN}"',
    );
  }
  return { token: expanded.value };
}
