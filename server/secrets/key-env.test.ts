/**
 * GATEHOUSE_SECRET_KEY: the forms it is accepted in, the ones refused (never echoing the value),
 * and that it wins over a key file beside the store, which it then neither reads nor creates.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkSecretKey, keyFilePath, loadSecretKey, SecretKeyError, secretKeyValues } from "./key";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dbFileInTempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-key-env-"));
  dirs.push(dir);
  return path.join(dir, "gatehouse.db");
}

function load(value: string, dbFile = ":memory:") {
  return loadSecretKey({ env: { GATEHOUSE_SECRET_KEY: value }, dbFile });
}

function refusedMessage(value: string): string {
  try {
    load(value);
  } catch (err) {
    if (err instanceof SecretKeyError) return err.message;
    throw err;
  }
  throw new Error("the key was accepted");
}

const bytes = randomBytes(32);
/** One key with a `+` and a `/` in its base64 form, so base64 and base64url spellings differ. */
const spelled = Buffer.from(Array.from({ length: 32 }, (_, i) => (i % 2 === 0 ? 0xfb : 0xff)));

describe("GATEHOUSE_SECRET_KEY", () => {
  it("is accepted as 64 hex characters, base64 or base64url, padded or not, with whitespace around", () => {
    const id = load(bytes.toString("hex")).id;
    for (const form of [
      bytes.toString("hex").toUpperCase(),
      bytes.toString("base64"),
      bytes.toString("base64").replace(/=$/, ""),
      bytes.toString("base64url"),
      `${bytes.toString("base64url")}=`,
      `  ${bytes.toString("base64")}\n`,
    ]) {
      const key = load(form);
      expect(key).toMatchObject({ source: "env", file: null, created: false, id });
    }
    expect(spelled.toString("base64")).toMatch(/[+/]/);
    expect(load(spelled.toString("base64")).id).toBe(load(spelled.toString("base64url")).id);
  });

  it("is refused when not 32 bytes in one of those forms, naming the variable and the forms, never the value", () => {
    const refused = [
      bytes.toString("hex").slice(0, 62),
      `${bytes.toString("hex")}00`,
      randomBytes(16).toString("base64"),
      randomBytes(33).toString("base64"),
      randomBytes(24).toString("hex"),
      // Mixed alphabets and a non-canonical last character are typos, not other spellings.
      `${spelled.toString("base64").slice(0, 10)}-${spelled.toString("base64").slice(11)}`,
      `${bytes.toString("base64url").slice(0, 42)}B`,
      "correct horse battery staple, a passphrase",
      "",
      "   ",
    ];
    for (const value of refused) {
      const message = refusedMessage(value);
      expect(message).toContain("GATEHOUSE_SECRET_KEY must be 32 bytes written as 64 hex characters");
      expect(message).toContain("base64url");
      if (value.trim().length > 0) expect(message).not.toContain(value.trim());
      // No piece of it either (the key material is what must not leak).
      if (value.trim().length >= 16) expect(message).not.toContain(value.trim().slice(4, 16));
    }
    expect(refusedMessage("")).toContain(
      "is set but empty (unset it to use the key file beside the database)",
    );
  });

  it("config check refuses a malformed value the same way as the start", () => {
    const value = randomBytes(20).toString("hex");
    expect(() => checkSecretKey({ env: { GATEHOUSE_SECRET_KEY: value }, dbFile: ":memory:" })).toThrow(
      refusedMessage(value),
    );
  });

  it("wins over a key file beside the store: the file is neither read nor created, and is named as unused", () => {
    const dbFile = dbFileInTempDir();
    const fromEnv = load(bytes.toString("hex"), dbFile);
    expect(fromEnv.unusedFile).toBeNull();
    expect(existsSync(keyFilePath(dbFile))).toBe(false);
    // A key file that exists, even one that would be refused (loose mode), is not looked into.
    writeFileSync(keyFilePath(dbFile), randomBytes(32), { mode: 0o644 });
    const again = load(bytes.toString("hex"), dbFile);
    expect(again).toMatchObject({ source: "env", id: fromEnv.id, unusedFile: keyFilePath(dbFile) });
  });

  it("the same value gives the same key id from one start to the next, and another value another", () => {
    expect(load(bytes.toString("hex")).id).toBe(load(bytes.toString("base64")).id);
    expect(load(randomBytes(32).toString("hex")).id).not.toBe(load(bytes.toString("hex")).id);
    expect(load(bytes.toString("hex")).id).toMatch(/^[A-Za-z0-9_-]{8}$/);
  });
});

describe("GATEHOUSE_SECRET_KEY on PostgreSQL", () => {
  const DATABASE_URL = "postgres://gatehouse:s3cret@db.example:5432/gatehouse";

  function refusal(fn: () => unknown): SecretKeyError {
    try {
      fn();
    } catch (err) {
      if (err instanceof SecretKeyError) return err;
      throw err;
    }
    throw new Error("the key was accepted");
  }

  it("is required: no key file is made or read for a store every replica shares", () => {
    const dbFile = dbFileInTempDir();
    // A key file beside GATEHOUSE_DB is not a key for PostgreSQL either: each replica would have its own.
    const viaEnv = refusal(() => loadSecretKey({ env: { DATABASE_URL }, dbFile }));
    expect(viaEnv.message).toContain("GATEHOUSE_SECRET_KEY is required with PostgreSQL");
    expect(viaEnv.message).toContain("every replica");
    expect(viaEnv.message).not.toContain("s3cret");
    expect(existsSync(keyFilePath(dbFile))).toBe(false);
    // Said so by the option too, whatever the environment holds, and by `config check`.
    const viaOption = refusal(() => loadSecretKey({ env: {}, dbFile, dialect: "postgres" }));
    expect(viaOption.message).toBe(viaEnv.message);
    expect(refusal(() => checkSecretKey({ env: { DATABASE_URL }, dbFile })).message).toBe(viaEnv.message);
    writeFileSync(keyFilePath(dbFile), randomBytes(32), { mode: 0o600 });
    expect(refusal(() => loadSecretKey({ env: { DATABASE_URL }, dbFile })).message).toBe(viaEnv.message);
    // Set but empty: the hint is not "unset it", which would not help here.
    const empty = refusal(() => loadSecretKey({ env: { DATABASE_URL, GATEHOUSE_SECRET_KEY: "" }, dbFile }));
    expect(empty.message).toContain("is set but empty");
    expect(empty.message).not.toContain("unset it");
  });

  it("is the key when set, with no key file named as unused", () => {
    const dbFile = dbFileInTempDir();
    writeFileSync(keyFilePath(dbFile), randomBytes(32), { mode: 0o600 });
    const key = loadSecretKey({ env: { DATABASE_URL, GATEHOUSE_SECRET_KEY: bytes.toString("hex") }, dbFile });
    expect(key).toMatchObject({
      source: "env",
      file: null,
      unusedFile: null,
      id: load(bytes.toString("hex")).id,
    });
    // An explicit SQLite wins over the environment (a test store beside a PostgreSQL deployment).
    expect(loadSecretKey({ env: { DATABASE_URL }, dbFile, dialect: "sqlite" }).source).toBe("file");
  });
});

describe("what of GATEHOUSE_SECRET_KEY the log redacts", () => {
  it("the value as set and as read, trimmed; nothing when it is unset or empty", () => {
    const hex = randomBytes(32).toString("hex");
    expect(secretKeyValues({ GATEHOUSE_SECRET_KEY: `  ${hex}\n` })).toEqual([`  ${hex}\n`, hex]);
    expect(secretKeyValues({ GATEHOUSE_SECRET_KEY: hex })).toEqual([hex]);
    expect(secretKeyValues({ GATEHOUSE_SECRET_KEY: "" })).toEqual([]);
    expect(secretKeyValues({})).toEqual([]);
  });
});
