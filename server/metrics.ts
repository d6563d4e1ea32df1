import "server-only";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { CallFact } from "./events";

/**
 * How a call's decision was made, the `how` label of {@link Metrics.decided}: a reviewer (approved
 * or denied), a rule, a grant, the tool's default (read-only runs), the checks before any of them
 * (tool not callable, arguments invalid, the definition changed before approval), the expiry, or
 * the requester's withdrawal.
 */
export type DecidedHow = "reviewer" | "rule" | "grant" | "default" | "check" | "expiry" | "withdrawal";

/** What a request to a tool server came to: answered, timed out, or failed otherwise. */
export type UpstreamOutcome = "ok" | "timeout" | "error";

/** The label value for anything not in the catalogue, or past {@link TOOL_LABEL_CAP}. */
export const OTHER = "other";

/**
 * At most this many distinct tool names are label values (per process); later ones count as
 * {@link OTHER}. A server that lists thousands of tools must not grow every scrape without bound.
 */
export const TOOL_LABEL_CAP = 500;

/** Buckets of the time from request to decision (s): rules answer in ms, reviewers in hours. */
const DECISION_BUCKETS = [0.005, 0.025, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14_400, 86_400];
/** Buckets of a request to a tool server (s). */
const UPSTREAM_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Buckets of a store transaction (s). */
const STORE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * Which names may be label values: the configured servers, and tool names the catalogue knows,
 * up to {@link TOOL_LABEL_CAP}. Never an argument, a token, a user's text or an error message:
 * every label value of a metric goes through {@link LabelBounds.server} or {@link LabelBounds.tool},
 * or is one of a fixed set named by its type.
 */
export class LabelBounds {
  private readonly servers: Set<string>;
  private readonly tools = new Set<string>();

  constructor(servers: Iterable<string>) {
    this.servers = new Set(servers);
  }

  /** The configured servers changed (a reload). */
  setServers(servers: Iterable<string>): void {
    this.servers.clear();
    for (const s of servers) this.servers.add(s);
  }

  server(name: string): string {
    return this.servers.has(name) ? name : OTHER;
  }

  /**
   * `tool` as a label value: `other` unless the catalogue knows it (`known`, its caller's word:
   * a call row names a catalogue tool only when its `server` is set) and the cap is not reached.
   */
  tool(tool: string, known: boolean): string {
    if (!known) return OTHER;
    if (this.tools.has(tool)) return tool;
    if (this.tools.size >= TOOL_LABEL_CAP) return OTHER;
    this.tools.add(tool);
    return tool;
  }
}

/**
 * The counters and histograms of one Gatehouse process, kept in memory and read by a scrape of
 * `/metrics` (scrape.ts, which adds the gauges read from the store and the manager at that
 * moment). Recording is a few map lookups: nothing here touches the store or waits. With
 * replicas, `replica` is a label on every series, so each replica's numbers stay its own.
 *
 * Every `record…` method takes label values already bounded ({@link LabelBounds}) or from a
 * fixed set; none may be given free text.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly bounds: LabelBounds;
  private readonly calls: Counter<"server" | "tool" | "outcome">;
  private readonly decisions: Histogram<"how">;
  private readonly upstream: Histogram<"server" | "method" | "outcome">;
  private readonly refreshes: Counter<"server" | "outcome">;
  private readonly catalogueChanges: Counter<"server" | "change">;
  private readonly deliveries: Counter<"destination" | "outcome">;
  private readonly signInFailures: Counter<"reason">;
  private readonly transactions: Histogram<"outcome">;

  /** False when the operator turned metrics off (`GATEHOUSE_METRICS=off`): nothing is recorded or served. */
  readonly enabled: boolean;

  /**
   * @param servers the configured servers' names (label values).
   * @param replica this replica's label, or null for a single process (no `replica` label).
   * @param enabled default true; false records nothing (every `record…` returns at once).
   */
  constructor(servers: Iterable<string>, replica: string | null, enabled = true) {
    this.enabled = enabled;
    this.bounds = new LabelBounds(servers);
    const registers = [this.registry];
    if (replica !== null) this.registry.setDefaultLabels({ replica });
    this.calls = new Counter({
      name: "gatehouse_calls_total",
      help: "Calls that reached a final status on this replica, by server, tool and outcome.",
      labelNames: ["server", "tool", "outcome"],
      registers,
    });
    this.decisions = new Histogram({
      name: "gatehouse_decision_seconds",
      help: "Time from a call's request to its decision, by how it was decided.",
      labelNames: ["how"],
      buckets: DECISION_BUCKETS,
      registers,
    });
    this.upstream = new Histogram({
      name: "gatehouse_upstream_request_seconds",
      help: "Requests to tool servers (tools/call, tools/list), by server, method and outcome.",
      labelNames: ["server", "method", "outcome"],
      buckets: UPSTREAM_BUCKETS,
      registers,
    });
    this.refreshes = new Counter({
      name: "gatehouse_tool_list_refreshes_total",
      help: "Tool lists received from tool servers and applied to the catalogue, by server and outcome.",
      labelNames: ["server", "outcome"],
      registers,
    });
    this.catalogueChanges = new Counter({
      name: "gatehouse_catalogue_changes_total",
      help: "Tools added, changed or removed by tool-list refreshes, by server.",
      labelNames: ["server", "change"],
      registers,
    });
    this.deliveries = new Counter({
      name: "gatehouse_notification_deliveries_total",
      help: "Notification delivery attempts, by destination kind and outcome.",
      labelNames: ["destination", "outcome"],
      registers,
    });
    this.signInFailures = new Counter({
      name: "gatehouse_sign_in_failures_total",
      help: "Refused sign-ins, by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.transactions = new Histogram({
      name: "gatehouse_store_transaction_seconds",
      help: "Store transactions (retries included), by outcome.",
      labelNames: ["outcome"],
      buckets: STORE_BUCKETS,
      registers,
    });
    if (enabled) collectDefaultMetrics({ register: this.registry, prefix: "gatehouse_" });
  }

  /**
   * A call stored in a new status here (the bus's {@link CallFact}): a final status counts the
   * call; a decision (a birth that runs or is refused, any move out of `pending`) is timed from
   * the request, and said how it was made.
   */
  recordCall({ from, call }: CallFact, now = Date.now()): void {
    if (!this.enabled) return;
    // A call for a tool the catalogue does not know is stored with no server.
    const known = call.server !== "";
    const server = known ? this.bounds.server(call.server) : OTHER;
    if (FINAL.has(call.status))
      this.calls.inc({ server, tool: this.bounds.tool(call.tool, known), outcome: call.status });
    const how = decidedHow(from, call);
    if (how && call.createdAt && Number.isFinite(Date.parse(call.createdAt)))
      this.decisions.observe({ how }, Math.max(0, (now - Date.parse(call.createdAt)) / 1000));
  }

  /** A request to a tool server took `seconds`. */
  recordUpstream(
    server: string,
    method: "tools/call" | "tools/list",
    outcome: UpstreamOutcome,
    seconds: number,
  ): void {
    if (!this.enabled) return;
    this.upstream.observe({ server, method, outcome }, seconds);
  }

  /** A tool list was applied (`ok`) or failed to apply, with how many tools it added, changed and removed. */
  recordRefresh(
    server: string,
    outcome: "ok" | "error",
    changes: { added: number; changed: number; removed: number } = { added: 0, changed: 0, removed: 0 },
  ): void {
    if (!this.enabled) return;
    this.refreshes.inc({ server, outcome });
    for (const change of ["added", "changed", "removed"] as const) {
      if (changes[change] > 0) this.catalogueChanges.inc({ server, change }, changes[change]);
    }
  }

  /** A notification delivery attempt to a `destination` kind ended as `outcome`. */
  recordDelivery(destination: "webhook" | "email", outcome: "delivered" | "retry" | "failed"): void {
    if (!this.enabled) return;
    this.deliveries.inc({ destination, outcome });
  }

  /** A sign-in was refused. */
  recordSignInFailure(reason: "bad_credentials" | "throttled"): void {
    if (!this.enabled) return;
    this.signInFailures.inc({ reason });
  }

  /** A store transaction took `seconds`. */
  recordTransaction(outcome: "committed" | "rolled_back", seconds: number): void {
    if (!this.enabled) return;
    this.transactions.observe({ outcome }, seconds);
  }

  /** Registers gauges read at scrape time (scrape.ts). */
  gauge<L extends string>(opts: {
    name: string;
    help: string;
    labelNames: readonly L[];
    collect: (this: Gauge<L>) => Promise<void>;
  }): Gauge<L> {
    return new Gauge({ ...opts, labelNames: [...opts.labelNames], registers: [this.registry] });
  }
}

/** The statuses a call ends in. */
const FINAL: ReadonlySet<string> = new Set([
  "succeeded",
  "failed",
  "interrupted",
  "refused",
  "denied",
  "expired",
  "withdrawn",
]);

/** How the decision a {@link CallFact} records was made, or null when it records none. */
export function decidedHow(from: CallFact["from"], call: CallFact["call"]): DecidedHow | null {
  if (from === "running") return null;
  // A refusal is a rule's only when a deny rule made it: a call held by a review rule keeps that
  // rule's name when it is refused at approval for another reason (its tool changed).
  if (call.status === "refused") return call.errorCode === "denied_by_rule" ? "rule" : "check";
  if (from === null) {
    if (call.status === "pending") return null;
    if (call.grantId) return "grant";
    return call.rule ? "rule" : "default";
  }
  switch (call.status) {
    case "running":
    case "denied":
      return "reviewer";
    case "expired":
      return "expiry";
    case "withdrawn":
      return "withdrawal";
    default:
      return null;
  }
}
