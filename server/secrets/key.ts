import "server-only";
import { createHash, createSecretKey, type KeyObject, randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import path from "node:path";

/** The environment variable that holds the key, overriding the key file. */
export const SECRET_KEY_ENV = "GATEHOUSE_SECRET_KEY";

/** An AES-256 key: 32 bytes, whatever its source. */
export const SECRET_KEY_BYTES = 32;

/** The key Gatehouse seals stored secrets with, and where it came from. */
export interface SecretKey {
  /** The key material, as a KeyObject: `util.inspect` and `JSON.stringify` never show its bytes. */
  readonly material: KeyObject;
  /**
   * A short, stable name of the key (8 base64url characters: the first 6 bytes of a SHA-256 of the
   * key behind a fixed label). It is written into every sealed value, so "sealed with another key"
   * can be told apart from "altered"; it tells nothing about the key itself.
   */
  readonly id: string;
  /** `env`: GATEHOUSE_SECRET_KEY; `file`: the key file beside the store; `memory`: a `:memory:` store. */
  readonly source: "env" | "file" | "memory";
  /** The key file, for `file` (null otherwise). */
  readonly file: string | null;
  /** Whether this load created the key file (the first start on this store). */
  readonly created: boolean;
  /** A key file beside the store that GATEHOUSE_SECRET_KEY overrides, so is not used (null when none). */
  readonly unusedFile: string | null;
}

/**
 * The key cannot be used: a malformed GATEHOUSE_SECRET_KEY, or a key file that is refused or
 * cannot be created. The message says what to do and never holds the key or the variable's value.
 */
export class SecretKeyError extends Error {
  readonly code = "GATEHOUSE_SECRET_KEY_REFUSED";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SecretKeyError";
  }
}

export interface SecretKeyOptions {
  /** The environment to read GATEHOUSE_SECRET_KEY from (the process's, at boot). */
  env: Record<string, string | undefined>;
  /** The SQLite file (GATEHOUSE_DB, resolved), or ":memory:". Not used on PostgreSQL. */
  dbFile: string;
  /**
   * The store the key is for. Default: PostgreSQL when `env.DATABASE_URL` names it (as
   * `storeLocation` reads it), else SQLite. On PostgreSQL there is no key file:
   * GATEHOUSE_SECRET_KEY is required.
   */
  dialect?: "sqlite" | "postgres";
}

/** Whether `env.DATABASE_URL` names PostgreSQL: `isPostgresUrl` of server/store/location.ts, which this room does not import. */
function storeDialect(opts: SecretKeyOptions): "sqlite" | "postgres" {
  if (opts.dialect) return opts.dialect;
  return /^postgres(ql)?:\/\//i.test(opts.env.DATABASE_URL?.trim() ?? "") ? "postgres" : "sqlite";
}

/**
 * The key file of a store: `<db file>.key` (`data/gatehouse.db.key` by default), beside the store
 * and named after it as its lock is (`<db>.lock`), so two stores in one folder never share a key
 * and a listing of the folder shows the key next to what it protects.
 */
export function keyFilePath(dbFile: string): string {
  return `${path.resolve(dbFile)}.key`;
}

/**
 * The key for sealing the store's secrets (OAuth tokens), resolved in this order:
 *
 * 1. `GATEHOUSE_SECRET_KEY`, when set (even to ""): 32 bytes written as 64 hex characters, or as
 *    base64 / base64url (43 characters, or 44 ending in `=`); surrounding whitespace is ignored.
 *    Anything else throws {@link SecretKeyError} naming the variable and the forms it takes. **It
 *    wins over a key file**: the file is then neither read nor created (`unusedFile` names it).
 * 2. On PostgreSQL (`dialect`, or DATABASE_URL), nothing else: without GATEHOUSE_SECRET_KEY it
 *    throws {@link SecretKeyError}. Every replica seals and opens the shared store's secrets, so
 *    all must hold the same key; a key file would be one replica's own.
 * 3. For `":memory:"`, a random key held in memory for this process (tests).
 * 4. The key file {@link keyFilePath}, created on first need: 32 random bytes written to a
 *    temporary file of mode 0600 in the same folder, flushed to disk, then hard-linked into place,
 *    which never replaces an existing file — so a crash leaves no half key, and of two processes
 *    starting at once one creates the key and the other reads it. The store's folder is created
 *    when missing, as `openDb` does. An existing file must be a regular file of exactly 32 bytes
 *    that neither group nor others may read or write; otherwise it is refused, with what to do.
 *
 * Changing the key (another GATEHOUSE_SECRET_KEY, a deleted or replaced key file) makes every
 * value sealed with the old one unreadable: back the key up with the database, and restore both.
 * Synchronous: it reads and writes files only, before the store opens.
 */
export function loadSecretKey(opts: SecretKeyOptions): SecretKey {
  const key = resolveKey(opts, true);
  if (!key) throw new SecretKeyError(`the secret key file ${keyFilePath(opts.dbFile)} could not be created`);
  return key;
}

/**
 * What {@link loadSecretKey} would refuse, without creating anything (for `config check`): throws
 * {@link SecretKeyError} for a malformed GATEHOUSE_SECRET_KEY or a refused key file; a missing key
 * file is no error (the start creates it).
 */
export function checkSecretKey(opts: SecretKeyOptions): void {
  resolveKey(opts, false);
}

/**
 * What of GATEHOUSE_SECRET_KEY the log must never show: the value as set and as read (trimmed:
 * a key pasted with a line break is still the key). Empty when it is not set.
 */
export function secretKeyValues(env: NodeJS.ProcessEnv | Record<string, string | undefined>): string[] {
  const given = env[SECRET_KEY_ENV];
  if (!given) return [];
  return [...new Set([given, given.trim()])].filter((v) => v.length > 0);
}

/** One line for the start's log: where the key comes from, never the key. */
export function describeSecretKey(key: SecretKey): string {
  if (key.source === "env") return `secret key from ${SECRET_KEY_ENV} (id ${key.id})`;
  if (key.source === "memory") return `secret key in memory (id ${key.id}): an in-memory store`;
  const made = key.created ? "created now, mode 0600; back it up with the database" : "mode 0600";
  return `secret key file ${key.file} (id ${key.id}; ${made})`;
}

function resolveKey(opts: SecretKeyOptions, create: boolean): SecretKey | null {
  const given = opts.env[SECRET_KEY_ENV];
  const postgres = storeDialect(opts) === "postgres";
  const memory = opts.dbFile === ":memory:";
  if (given !== undefined) {
    // On PostgreSQL a key file beside GATEHOUSE_DB belongs to no store: it is not named.
    const file = memory || postgres ? null : keyFilePath(opts.dbFile);
    const unusedFile = file !== null && existsSync(file) ? file : null;
    return makeKey(keyFromEnv(given, postgres), { source: "env", file: null, created: false, unusedFile });
  }
  if (postgres) {
    throw new SecretKeyError(
      `${SECRET_KEY_ENV} is required with PostgreSQL (DATABASE_URL): every replica must seal and open ` +
        "the stored secrets with the same key, and there is no key file beside a shared store. Make one " +
        "with: openssl rand -base64 32, and give every replica that same value",
    );
  }
  if (memory) return makeKey(randomBytes(SECRET_KEY_BYTES), { source: "memory", file: null, created: false });
  const file = keyFilePath(opts.dbFile);
  const existing = readKeyFile(file);
  // Only where the key is loaded for use: `config check` changes nothing.
  if (create) removeStaleCopies(file);
  if (existing) return makeKey(existing, { source: "file", file, created: false });
  if (!create) return null;
  const created = createKeyFile(file);
  // Read back in both cases: the winner checks what it linked, the loser takes the winner's key.
  const bytes = readKeyFile(file);
  if (!bytes) throw new SecretKeyError(`the secret key file ${file} vanished while it was being created`);
  return makeKey(bytes, { source: "file", file, created });
}

function makeKey(
  bytes: Buffer,
  where: { source: SecretKey["source"]; file: string | null; created: boolean; unusedFile?: string | null },
): SecretKey {
  const id = createHash("sha256")
    .update("gatehouse secret key id\0")
    .update(bytes)
    .digest()
    .subarray(0, 6)
    .toString("base64url");
  const material = createSecretKey(bytes);
  // The KeyObject holds its own copy: the buffer is not left around with the key in it.
  bytes.fill(0);
  return Object.freeze({ material, id, unusedFile: null, ...where });
}

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^(?:[A-Za-z0-9+/]{43}|[A-Za-z0-9_-]{43})=?$/;

/** GATEHOUSE_SECRET_KEY as 32 bytes. The error says the forms, never the value. */
function keyFromEnv(given: string, postgres: boolean): Buffer {
  const text = given.trim();
  if (HEX_KEY.test(text)) return Buffer.from(text, "hex");
  if (BASE64_KEY.test(text)) {
    // One alphabet throughout (the pattern), then canonical: 43 characters carry 258 bits, and a
    // value whose last two are not zero is a typo, not another spelling of the same key.
    const bare = text.replace(/=$/, "").replace(/\+/g, "-").replace(/\//g, "_");
    const bytes = Buffer.from(bare, "base64url");
    if (bytes.length === SECRET_KEY_BYTES && bytes.toString("base64url") === bare) return bytes;
  }
  const what =
    text.length === 0
      ? postgres
        ? "is set but empty (PostgreSQL needs the key itself)"
        : "is set but empty (unset it to use the key file beside the database)"
      : `is not in one of those forms (it is ${text.length} characters long)`;
  throw new SecretKeyError(
    `${SECRET_KEY_ENV} must be 32 bytes written as 64 hex characters, or as base64 or base64url ` +
      `(43 characters, or 44 ending in "="); it ${what}. Make one with: openssl rand -base64 32`,
  );
}

/**
 * The key in `file`, or null when there is no such file. Opened before it is judged, and judged on
 * what was opened (fstat), so the file checked is the file read; opened non-blocking, so a FIFO put
 * in its place is refused instead of hanging the start.
 */
function readKeyFile(file: string): Buffer | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    // ENOTDIR: a file where the store's folder should be; creating the key then says so.
    if (errorCode(err) === "ENOENT" || errorCode(err) === "ENOTDIR") return null;
    throw new SecretKeyError(
      `the secret key file ${file} cannot be read (${errorCode(err) ?? String(err)}): it must be a file ` +
        `owned by the user Gatehouse runs as, or set ${SECRET_KEY_ENV} instead`,
      { cause: err },
    );
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) {
      throw new SecretKeyError(
        `the secret key file ${file} is not a regular file: it must be a file of ${SECRET_KEY_BYTES} ` +
          `random bytes (move this one away and Gatehouse creates one), or set ${SECRET_KEY_ENV}`,
      );
    }
    const loose = stat.mode & 0o077;
    if (loose !== 0) {
      const mode = (stat.mode & 0o777).toString(8).padStart(4, "0");
      throw new SecretKeyError(
        `the secret key file ${file} is open to other users (mode ${mode}): only its owner may read it. ` +
          `Run: chmod 600 ${file} (on a file system that keeps no Unix permissions, such as a Windows ` +
          `share, that cannot hold: keep the store elsewhere, or set ${SECRET_KEY_ENV} instead)`,
      );
    }
    if (stat.size !== SECRET_KEY_BYTES) {
      throw new SecretKeyError(
        `the secret key file ${file} holds ${stat.size} bytes, not the ${SECRET_KEY_BYTES} of a key. ` +
          "Restore it from the backup taken with the database (another key cannot open what this one " +
          "sealed); only if nothing was ever sealed with it, delete it and Gatehouse creates a new one",
      );
    }
    const bytes = Buffer.alloc(SECRET_KEY_BYTES);
    let read = 0;
    while (read < SECRET_KEY_BYTES) {
      const n = readSync(fd, bytes, read, SECRET_KEY_BYTES - read, read);
      if (n === 0) throw new SecretKeyError(`the secret key file ${file} was shortened while being read`);
      read += n;
    }
    return bytes;
  } finally {
    closeSync(fd);
  }
}

/**
 * Creates `file` with 32 random bytes unless it exists; whether this call created it. The bytes go
 * to a temporary file first and are flushed before the link, so `file` is never seen half
 * written, even after a power cut; `linkSync` fails on an existing name where a rename would
 * replace it, which is what makes two racing starts end with one key.
 */
function createKeyFile(file: string): boolean {
  const dir = path.dirname(file);
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    const code = errorCode(err) ?? String(err);
    throw new SecretKeyError(
      `the folder ${dir} of the secret key file cannot be created (${code}` +
        `${code === "EEXIST" ? ": something that is not a folder has its name" : ""}): it is the store's ` +
        `folder (GATEHOUSE_DB), so give it as a folder the user Gatehouse runs as may write, or set ${SECRET_KEY_ENV}`,
      { cause: err },
    );
  }
  try {
    const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      const bytes = randomBytes(SECRET_KEY_BYTES);
      let written = 0;
      while (written < bytes.length)
        written += writeSync(fd, bytes, written, bytes.length - written, written);
      bytes.fill(0);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    removeQuietly(temp);
    throw cannotCreate(file, err);
  }
  let created: boolean;
  try {
    linkSync(temp, file);
    created = true;
  } catch (err) {
    if (errorCode(err) !== "EEXIST") throw cannotCreate(file, err);
    created = false;
  } finally {
    removeQuietly(temp);
  }
  if (created) syncFolder(dir);
  return created;
}

/**
 * Removes the temporary copies a start that died between writing and linking left beside `file`
 * (`.<name>.<pid>.<random>.tmp`): those of a process that is gone. A live process's copy is its
 * own, on its way to the link, and is let be.
 */
function removeStaleCopies(file: string): void {
  const dir = path.dirname(file);
  const prefix = `.${path.basename(file)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith(".tmp")) continue;
    const pid = Number(/^(\d+)\.[0-9a-f]+\.tmp$/.exec(name.slice(prefix.length))?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || processAlive(pid)) continue;
    removeQuietly(path.join(dir, name));
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return errorCode(err) === "EPERM";
  }
}

function cannotCreate(file: string, err: unknown): SecretKeyError {
  return new SecretKeyError(
    `the secret key file ${file} cannot be created (${errorCode(err) ?? String(err)}): make its folder ` +
      `writable by the user Gatehouse runs as (on a file system with hard links), or set ${SECRET_KEY_ENV}`,
    { cause: err },
  );
}

/** Makes the new name durable; a folder that cannot be opened or synced (some file systems) is let be. */
function syncFolder(dir: string): void {
  try {
    const fd = openSync(dir, constants.O_RDONLY);
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // The key itself was flushed; only the name's durability depends on this.
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Never created, or already gone.
  }
}

function errorCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err && typeof err.code === "string"
    ? err.code
    : undefined;
}
