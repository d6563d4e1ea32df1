/**
 * The sealed box: what it seals opens again only with the same key and context; an altered value,
 * one moved to another place and one sealed with another key are refused with a typed reason, in
 * words that hold neither the plaintext, the key nor the sealed text.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SecretBox, SecretBoxError, type SecretBoxFailure } from "./box";
import { loadSecretKey } from "./key";

const CONTEXT = "oauth:notion:refresh_token";
const TOKEN = "rt_9f8e7d6c5b4a39281706f5e4d3c2b1a0-Refresh-Token-Value";
const keyHex = randomBytes(32).toString("hex");

function boxWith(hex: string): SecretBox {
  return new SecretBox(loadSecretKey({ env: { GATEHOUSE_SECRET_KEY: hex }, dbFile: ":memory:" }));
}

const box = boxWith(keyHex);

function failure(open: () => string): SecretBoxError {
  try {
    open();
  } catch (err) {
    if (err instanceof SecretBoxError) return err;
    throw err;
  }
  throw new Error("the sealed value opened");
}

/** Every piece of text the error must not carry. */
function expectNothingSecretIn(err: SecretBoxError, sealed: string): void {
  const text = `${err.message} ${String(err.stack)}`;
  expect(text).not.toContain(TOKEN);
  expect(text).not.toContain(TOKEN.slice(8, 24));
  expect(text).not.toContain(keyHex);
  expect(text).not.toContain(Buffer.from(keyHex, "hex").toString("base64url"));
  expect(text).not.toContain(sealed);
  for (const part of sealed.split(".").slice(2)) expect(text).not.toContain(part);
}

/** `sealed` with one byte of its ciphertext-and-tag part flipped (and still base64url). */
function flipByte(sealed: string, index: number): string {
  const parts = sealed.split(".");
  const body = Buffer.from(parts[3] ?? "", "base64url");
  body[index] = (body[index] ?? 0) ^ 0x01;
  parts[3] = body.toString("base64url");
  return parts.join(".");
}

describe("SecretBox", () => {
  it("opens what it sealed, for the same context, unicode included", () => {
    for (const value of [TOKEN, "", "ünïcødé 🔑 token", "x".repeat(10_000)]) {
      expect(box.open(box.seal(value, CONTEXT), CONTEXT)).toBe(value);
    }
    // Another box with the same key (the next start) opens it too.
    expect(boxWith(keyHex).open(box.seal(TOKEN, CONTEXT), CONTEXT)).toBe(TOKEN);
  });

  it("writes v1.<key id>.<nonce>.<ciphertext+tag> in base64url, with a fresh nonce each time", () => {
    const a = box.seal(TOKEN, CONTEXT);
    const b = box.seal(TOKEN, CONTEXT);
    expect(a).toMatch(/^v1\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/);
    expect(a.split(".")[1]).toBe(box.keyId);
    expect(a).not.toBe(b);
    expect(a.split(".")[2]).not.toBe(b.split(".")[2]);
  });

  it("the sealed text holds no piece of the plaintext, in any encoding", () => {
    const sealed = box.seal(TOKEN, CONTEXT);
    for (let i = 0; i + 6 <= TOKEN.length; i++) expect(sealed).not.toContain(TOKEN.slice(i, i + 6));
    expect(sealed).not.toContain(Buffer.from(TOKEN).toString("base64url").slice(0, 12));
    expect(sealed).not.toContain(Buffer.from(TOKEN).toString("hex").slice(0, 12));
  });

  it("a value moved to another context (row or field) does not open there", () => {
    const sealed = box.seal(TOKEN, CONTEXT);
    for (const other of ["oauth:notion:access_token", "oauth:linear:refresh_token", `${CONTEXT} `]) {
      const err = failure(() => box.open(sealed, other));
      expect(err.reason).toBe<SecretBoxFailure>("not_authentic");
      expect(err.message).toBe(
        `the value stored for "${other}" does not open: it was altered, or sealed for another place`,
      );
      expectNothingSecretIn(err, sealed);
    }
  });

  it("a flipped byte anywhere in the ciphertext or tag is refused as altered", () => {
    const sealed = box.seal(TOKEN, CONTEXT);
    const length = Buffer.from(sealed.split(".")[3] ?? "", "base64url").length;
    for (const index of [0, 10, length - 17, length - 16, length - 1]) {
      const err = failure(() => box.open(flipByte(sealed, index), CONTEXT));
      expect(err.reason).toBe<SecretBoxFailure>("not_authentic");
      expectNothingSecretIn(err, sealed);
    }
    // The nonce is authenticated too.
    const parts = sealed.split(".");
    const nonce = Buffer.from(parts[2] ?? "", "base64url");
    nonce[0] = (nonce[0] ?? 0) ^ 0x80;
    const moved = [parts[0], parts[1], nonce.toString("base64url"), parts[3]].join(".");
    expect(failure(() => box.open(moved, CONTEXT)).reason).toBe("not_authentic");
  });

  it("a value sealed with another key is told apart from an altered one, naming both key ids", () => {
    const other = boxWith(randomBytes(32).toString("hex"));
    const sealed = other.seal(TOKEN, CONTEXT);
    const err = failure(() => box.open(sealed, CONTEXT));
    expect(err.reason).toBe<SecretBoxFailure>("other_key");
    expect(err.message).toContain(
      `sealed with another key (id ${other.keyId}; the current key is ${box.keyId})`,
    );
    expectNothingSecretIn(err, sealed);
    // The same value, its key id rewritten to ours, is then judged as altered: the id is authenticated.
    const forged = ["v1", box.keyId, ...sealed.split(".").slice(2)].join(".");
    expect(failure(() => box.open(forged, CONTEXT)).reason).toBe("not_authentic");
  });

  it("text that is not a sealed value is refused as malformed, and a newer format as unsupported", () => {
    const sealed = box.seal(TOKEN, CONTEXT);
    const [, id, nonce, body] = sealed.split(".");
    for (const bad of [
      "",
      TOKEN,
      `v1.${id}.${nonce}`,
      `v1.${id}.${nonce}.${body}.extra`,
      `v1.${id}.${nonce}=.${body}`,
      `v1.${id}.${nonce}.${body}==`,
      `v1.${id}.${nonce?.slice(2)}.${body}`,
      `v1.${id}.${nonce}.${body?.slice(0, 20)}`,
      `v1.short.${nonce}.${body}`,
      `V1.${id}.${nonce}.${body}`,
    ]) {
      const err = failure(() => box.open(bad, CONTEXT));
      expect(err.reason).toBe<SecretBoxFailure>("malformed");
      expect(err.message).toBe(`the value stored for "${CONTEXT}" is not a sealed value`);
    }
    const newer = failure(() => box.open(`v2.${id}.${nonce}.${body}`, CONTEXT));
    expect(newer.reason).toBe<SecretBoxFailure>("unsupported_version");
    expect(newer.message).toContain("format v2, which this Gatehouse cannot open");
  });

  it("refuses to seal without a context or a string that would not come back whole", () => {
    expect(() => box.seal(TOKEN, "")).toThrow(TypeError);
    expect(() => box.open(box.seal(TOKEN, CONTEXT), "")).toThrow(TypeError);
    expect(() => box.seal("lone \uD800 surrogate", CONTEXT)).toThrow(TypeError);
  });

  it("its key shows no bytes when the box or the key is printed or serialised", async () => {
    const { inspect } = await import("node:util");
    const key = loadSecretKey({ env: { GATEHOUSE_SECRET_KEY: keyHex }, dbFile: ":memory:" });
    const shown = `${inspect(key, { depth: 5, showHidden: true })} ${inspect(box, { depth: 5 })} ${JSON.stringify(key)} ${JSON.stringify(box)}`;
    expect(shown).not.toContain(keyHex);
    // As util.inspect shows a Buffer's bytes: `<Buffer fb 0c …>`.
    expect(shown).not.toContain(keyHex.slice(0, 16).replace(/(..)(?!$)/g, "$1 "));
    expect(shown).not.toContain(Buffer.from(keyHex, "hex").toString("base64"));
    expect(shown).not.toContain(Buffer.from(keyHex, "hex").toString("base64url").slice(0, 20));
  });
});
