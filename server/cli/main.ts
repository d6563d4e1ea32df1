/**
 * `npm run gatehouse -- <command>`: config check, user add/set/remove, token create/set/list/revoke, rules
 * test. Uses the same environment variables as the server (GATEHOUSE_CONFIG; the store:
 * DATABASE_URL for PostgreSQL, else GATEHOUSE_DB).
 */
import { CreateUserBody, roles, UpdateUserBody, userEmail } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { LoginThrottle } from "../auth/access";
import { pendingWithdrawal, removeUser, sessionsText, updatePerson } from "../auth/user-admin";
import { createUser } from "../auth/users";
import { revokeAgent } from "../calls/revoke-agent";
import { transition } from "../calls/transition";
import { configPathFromEnv, formatIssues, loadConfigFile } from "../config";
import { EventBus } from "../events";
import { checkSecretKey, SecretKeyError } from "../secrets";
import { closeDb, type Db, dbPathFromEnv, openStore } from "../store/db";
import { describeLocation, type StoreLocation, storeLocation } from "../store/location";
import { optionValue } from "./args";
import { rulesTest } from "./rules-test";
import { tokenCreate, tokenList, tokenSet } from "./tokens";

const USAGE = `usage: npm run gatehouse -- <command>
  config check [FILE]                     validate a config file (default: GATEHOUSE_CONFIG or gatehouse.json)
                                          and the secret key (GATEHOUSE_SECRET_KEY or GATEHOUSE_DB's key file;
                                          GATEHOUSE_SECRET_KEY with DATABASE_URL), and name the store
  user add NAME --role owner|reviewer [--email ADDRESS]
                                          add a user; the password is read from stdin
  user set NAME [--role ROLES] [--email ADDRESS] [--password]
                                          change a user: roles (comma-separated), address ("" clears
                                          it), or a new password read from stdin, which ends all
                                          their sessions
  user remove NAME                        remove a user (never the last owner): their grants end,
                                          pending calls are withdrawn, sessions end; history keeps
                                          the name
  token create NAME [--tool-set SET]      create an agent token, in a tool set of the config if
                                          given; prints it once, on the last line
  token set NAME --tool-set SET | --no-tool-set
                                          move a token into another tool set (or none: every
                                          enabled tool); judged on its next request
  token list                              the tokens, their tool sets and status
  token revoke NAME                       revoke an agent token
  rules test TOOL 'ARGS-JSON' [--agent NAME]
                                          print which rule would decide such a call now, and why
                                          (the catalogue and grants in the store); calls nothing`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

/**
 * Opens the store the server uses (DATABASE_URL, else GATEHOUSE_DB), migrated, runs `fn` on it
 * and closes it.
 */
async function withStore<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await openStore(storeLocation());
  try {
    return await fn(db);
  } finally {
    await closeDb(db);
  }
}

async function main(argv: string[]): Promise<number> {
  const [group, verb, ...rest] = argv;
  if (group === "config" && verb === "check") return configCheck(rest[0] ?? configPathFromEnv());
  if (group === "user" && verb === "add") {
    const name = rest[0];
    const roleArg = optionValue(rest, "--role");
    const email = optionValue(rest, "--email");
    if (!name || name.startsWith("--") || !roleArg)
      throw new GatehouseError("bad_request", `user add needs NAME and --role\n${USAGE}`);
    if (rest.includes("--email") && email === undefined)
      throw new GatehouseError("bad_request", `--email needs an ADDRESS\n${USAGE}`);
    const wanted = roleArg.split(",");
    // Checked before the password is read, so a typo in the address fails without waiting on stdin.
    const parsedEmail = userEmail.optional().safeParse(email);
    if (!parsedEmail.success) {
      throw new GatehouseError("bad_request", `email: ${parsedEmail.error.issues[0]?.message ?? "invalid"}`);
    }
    const password = await readStdin();
    const parsed = CreateUserBody.safeParse({ name, password, roles: wanted, email });
    if (!parsed.success) throw new GatehouseError("bad_request", firstIssue(parsed.error));
    const user = await withStore((db) => createUser(db, { ...parsed.data, actor: "cli" }));
    const address = user.email ? ` <${user.email}>` : "";
    process.stdout.write(`added user ${user.name} (${user.roles.join(", ")})${address}\n`);
    return 0;
  }
  if (group === "user" && verb === "set") return userSet(rest);
  if (group === "user" && verb === "remove") return userRemove(rest);
  if (group === "token" && verb === "create") return tokenCreate(rest, USAGE, withStore);
  if (group === "token" && verb === "set") return tokenSet(rest, USAGE, withStore);
  if (group === "token" && verb === "list") return tokenList(withStore);
  if (group === "token" && verb === "revoke") {
    const name = rest[0];
    if (!name) throw new GatehouseError("bad_request", `token revoke needs NAME\n${USAGE}`);
    const { withdrawn } = await withStore(async (db) =>
      revokeAgent(db, new EventBus(), { name, actor: "cli" }),
    );
    const calls = withdrawn === 0 ? "" : `; ${withdrawn} pending call${withdrawn === 1 ? "" : "s"} withdrawn`;
    process.stdout.write(`revoked agent token ${name}${calls}\n`);
    return 0;
  }
  if (group === "rules" && verb === "test") {
    if (rest.includes("--agent") && optionValue(rest, "--agent") === undefined)
      throw new GatehouseError("bad_request", `--agent needs a NAME\n${USAGE}`);
    const [tool, argsJson] = rest.filter((w, i) => !w.startsWith("--") && rest[i - 1] !== "--agent");
    return rulesTest(configPathFromEnv(), tool, argsJson, optionValue(rest, "--agent"));
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

/**
 * `config check [FILE]`: the config's issues, the secret key's problem and the store the server
 * would use (its password never shown), as `npm start`'s first step. 0 when the server would
 * start with them, else 1.
 */
function configCheck(path: string): number {
  const result = loadConfigFile(path);
  const text = formatIssues(result);
  if (text) process.stderr.write(`${text}\n`);
  // Which store, as the server would read it: a DATABASE_URL it would refuse stops here too.
  let location: StoreLocation | null = null;
  try {
    location = storeLocation();
  } catch (err) {
    if (!(err instanceof GatehouseError)) throw err;
    process.stderr.write(`store: ${err.message}\n`);
  }
  // The start runs this check first: a key the server would refuse stops `npm start` here too.
  const keyProblem = secretKeyProblem(location);
  if (keyProblem) process.stderr.write(`${keyProblem}\n`);
  // Named whatever the verdict (after it), never with the URL's password.
  const storeLine = location ? `store: ${describeLocation(location)}\n` : "";
  if (!result.config || result.errors.length > 0) {
    process.stderr.write(`${path}: ${result.errors.length} error(s)\n`);
    process.stdout.write(storeLine);
    return 1;
  }
  if (keyProblem || !location) {
    process.stdout.write(storeLine);
    return 1;
  }
  const n = result.config.servers.length;
  process.stdout.write(
    `${path}: OK (${n} server${n === 1 ? "" : "s"}, ${result.warnings.length} warning(s))\n${storeLine}`,
  );
  return 0;
}

/**
 * Why the server would refuse GATEHOUSE_SECRET_KEY or the key file beside GATEHOUSE_DB (or the
 * lack of GATEHOUSE_SECRET_KEY on PostgreSQL), or null. Creates nothing: a missing key file is
 * made by the server's first start. `location` null (DATABASE_URL refused): as the environment says.
 */
function secretKeyProblem(location: StoreLocation | null): string | null {
  try {
    checkSecretKey({ env: process.env, dbFile: dbPathFromEnv(), dialect: location?.dialect });
    return null;
  } catch (err) {
    if (err instanceof SecretKeyError) return `secret key: ${err.message}`;
    throw err;
  }
}

/** The first problem of a body the API would refuse, in the API's words ("roles: …"). */
function firstIssue(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }): string {
  const issue = error.issues[0];
  const field = String(issue?.path[0] ?? "input");
  const hint = field === "roles" ? ` (one of ${roles.join(", ")})` : "";
  return `${field}: ${issue?.message ?? "invalid"}${hint}`;
}

/** `user set NAME [--role ROLES] [--email ADDRESS] [--password]`: the API's PATCH, by the CLI. */
async function userSet(rest: string[]): Promise<number> {
  const name = rest[0];
  const roleArg = optionValue(rest, "--role");
  const email = optionValue(rest, "--email");
  const resetPassword = rest.includes("--password");
  if (!name || name.startsWith("--"))
    throw new GatehouseError("bad_request", `user set needs NAME\n${USAGE}`);
  if (rest.includes("--role") && roleArg === undefined)
    throw new GatehouseError("bad_request", `--role needs ROLES\n${USAGE}`);
  if (rest.includes("--email") && email === undefined)
    throw new GatehouseError("bad_request", `--email needs an ADDRESS\n${USAGE}`);
  if (roleArg === undefined && email === undefined && !resetPassword)
    throw new GatehouseError("bad_request", `user set needs --role, --email or --password\n${USAGE}`);
  const wanted = roleArg?.split(",");
  // Checked before the password is read, so a typo fails without waiting on stdin.
  if (wanted !== undefined || email !== undefined) {
    const early = UpdateUserBody.safeParse({ roles: wanted, email });
    if (!early.success) throw new GatehouseError("bad_request", firstIssue(early.error));
  }
  const password = resetPassword ? await readStdin() : undefined;
  const parsed = UpdateUserBody.safeParse({ roles: wanted, email, password });
  if (!parsed.success) throw new GatehouseError("bad_request", firstIssue(parsed.error));
  // The throttle's counts are in the store: a reset here unlocks the name for every server on it.
  const { user, sessionsEnded } = await withStore((db) =>
    updatePerson(db, new LoginThrottle(db), { name, ...parsed.data, actor: "cli" }),
  );
  const address = user.email ? ` <${user.email}>` : "";
  const reset = resetPassword ? `; password reset, ${sessionsText(sessionsEnded)} ended` : "";
  process.stdout.write(`updated user ${user.name} (${user.roles.join(", ")})${address}${reset}\n`);
  return 0;
}

/** `user remove NAME`: the API's DELETE, by the CLI. */
async function userRemove(rest: string[]): Promise<number> {
  const name = rest[0];
  if (!name || name.startsWith("--"))
    throw new GatehouseError("bad_request", `user remove needs NAME\n${USAGE}`);
  // The CLI's bus has no listener: the server's pages learn of it at their next fetch.
  const bus = new EventBus();
  const removed = await withStore((db) =>
    removeUser(db, {
      name,
      actor: "cli",
      withdrawPending: async (tx, requester, why) =>
        (await transition(tx, bus, pendingWithdrawal(requester, why, "cli"))).length,
    }),
  );
  const { sessionsEnded: s, grantsEnded: g, callsWithdrawn: c } = removed;
  process.stdout.write(
    `removed user ${removed.user.name}; ${sessionsText(s)} ended, ${g} grant${g === 1 ? "" : "s"} ended, ` +
      `${c} pending call${c === 1 ? "" : "s"} withdrawn\n`,
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`error: ${err instanceof GatehouseError ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
