/**
 * A throwaway PostgreSQL cluster for tests and the benchmark: Debian's `postgresql` package
 * (installed with apt-get when missing and running as root), initialised in a temporary
 * directory, listening on 127.0.0.1 at a free port, owned by the process that started it.
 * Run as root, the server runs as the `postgres` user (PostgreSQL refuses root).
 *
 *   node scripts/postgres.mjs            starts one, prints `DATABASE_URL=…`, stops on Ctrl-C
 *   import { startPostgres } from …      { url, stop() } for a test run
 *
 * Not for production: fsync is off and the data goes when it stops.
 */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** Debian's PostgreSQL binaries (the newest version installed), or null. */
function binDir() {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], "bin") : null;
}

/** Installs Debian's `postgresql` when it is missing (root only); returns its bin directory. */
export function ensurePostgresInstalled() {
  let bin = binDir();
  if (bin) return bin;
  if (!isRoot || !existsSync("/usr/bin/apt-get")) {
    throw new Error(
      "PostgreSQL is not installed: install Debian's postgresql package (apt-get install postgresql)",
    );
  }
  for (const args of [
    ["update", "-qq"],
    ["install", "-y", "-qq", "postgresql"],
  ]) {
    const r = spawnSync("apt-get", args, { stdio: "inherit" });
    if (r.status !== 0) throw new Error(`apt-get ${args.join(" ")} failed`);
  }
  bin = binDir();
  if (!bin)
    throw new Error("apt-get installed postgresql, but no initdb was found under /usr/lib/postgresql");
  return bin;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The `postgres` user's ids when running as root (PostgreSQL refuses to run as root), else none. */
function owner() {
  if (!isRoot) return {};
  const id = (flag) => Number(spawnSync("id", [flag, "postgres"]).stdout.toString().trim());
  return { uid: id("-u"), gid: id("-g") };
}

/**
 * Spawn arguments running a PostgreSQL binary as the user PostgreSQL accepts: the binary itself,
 * with its uid and gid, not through runuser, so a signal to the child reaches the server.
 */
function asOwner(bin, args, opts = {}) {
  return [bin, args, { ...opts, ...owner(), cwd: "/" }];
}

async function ready(port, bin, deadline) {
  while (Date.now() < deadline) {
    const r = spawnSync(path.join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port), "-q"]);
    if (r.status === 0) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`PostgreSQL did not accept connections on port ${port} within the deadline`);
}

/**
 * Starts a cluster; resolves `{ url, port, pid, stop }` once it accepts connections. `url` is the
 * superuser `gatehouse`'s, on database `postgres`; `pid` is the server's (the postmaster, parent of
 * its backends); `stop()` ends the server and removes its data.
 */
export async function startPostgres({ maxConnections = 300 } = {}) {
  const bin = ensurePostgresInstalled();
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-pg-"));
  const data = path.join(dir, "data");
  const password = randomBytes(12).toString("hex");
  const pwfile = path.join(dir, "pw");
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (isRoot) {
    chmodSync(dir, 0o755);
    const { uid, gid } = owner();
    chownSync(dir, uid, gid);
    chownSync(pwfile, uid, gid);
  }
  const init = spawnSync(
    ...asOwner(path.join(bin, "initdb"), [
      "-D",
      data,
      "-U",
      "gatehouse",
      "--pwfile",
      pwfile,
      "-A",
      "scram-sha-256",
      "--no-sync",
      "-E",
      "UTF8",
      "--locale",
      "C",
    ]),
  );
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr?.toString() ?? ""}`);
  const port = await freePort();
  const [cmd, args, spawnOpts] = asOwner(path.join(bin, "postgres"), [
    "-D",
    data,
    "-p",
    String(port),
    "-k",
    dir,
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "fsync=off",
    "-c",
    "synchronous_commit=off",
    "-c",
    "full_page_writes=off",
    "-c",
    `max_connections=${maxConnections}`,
  ]);
  const server = spawn(cmd, args, { ...spawnOpts, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  server.stderr.on("data", (d) => {
    log = (log + d.toString()).slice(-4000);
  });
  const exited = new Promise((resolve) => server.once("exit", resolve));
  try {
    await Promise.race([
      ready(port, bin, Date.now() + 30_000),
      exited.then(() => {
        throw new Error(`PostgreSQL exited at start: ${log}`);
      }),
    ]);
  } catch (err) {
    server.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = `postgres://gatehouse:${password}@127.0.0.1:${port}/postgres`;
  let stopped = false;
  return {
    url,
    port,
    pid: server.pid,
    async stop() {
      if (stopped) return;
      stopped = true;
      // SIGINT: "fast" shutdown, connections are ended; the data is thrown away anyway.
      server.kill("SIGINT");
      const timer = setTimeout(() => server.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const pg = await startPostgres();
  console.log(`DATABASE_URL=${pg.url}`);
  const end = () => pg.stop().then(() => process.exit(0));
  process.once("SIGINT", end);
  process.once("SIGTERM", end);
}
