import "server-only";
import { formatIssues, type GatehouseConfig, loadConfigFile } from "../config";

/** What the CLI's commands share: reading their options, and the config file. */

/** The word after `flag`, unless it is missing or another flag. */
export function optionValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  const value = i >= 0 ? args[i + 1] : undefined;
  return value === undefined || value.startsWith("--") ? undefined : value;
}

/** The config at `path`, or null after printing its issues and how many errors there are. */
export function configOrIssues(path: string): GatehouseConfig | null {
  const loaded = loadConfigFile(path);
  if (loaded.config) return loaded.config;
  process.stderr.write(`${formatIssues(loaded)}\n${path}: ${loaded.errors.length} error(s)\n`);
  return null;
}
