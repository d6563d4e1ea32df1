import "server-only";
import {
  createCipheriv,
  createDecipheriv,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from "node:crypto";
import type { SecretKey } from "./key";

/** The one format version this box writes and opens. */
const VERSION = "v1";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const KEY_ID = /^[A-Za-z0-9_-]{8}$/;
/** A UTF-16 surrogate not part of a pair (with the `u` flag a pair is one code point, never `Cs`). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Why a sealed value did not open:
 * - `malformed`: not text this box writes (cut short, not base64url, wrong sizes);
 * - `unsupported_version`: a format version this Gatehouse does not know (written by a newer one);
 * - `other_key`: sealed with another key than the current one (the key file or
 *   GATEHOUSE_SECRET_KEY changed since), told apart by the key id in the value;
 * - `not_authentic`: the right key, but it fails authentication: altered, or sealed for another
 *   context (moved to another row or field). AES-GCM cannot tell these two apart, and need not.
 */
export type SecretBoxFailure = "malformed" | "unsupported_version" | "other_key" | "not_authentic";

const BRAND = Symbol.for("gatehouse.secretbox.error");

/**
 * A sealed value that does not open. Its message is plain and holds neither the plaintext, the key
 * nor the sealed text (the context and key ids, which are no secrets, may be named).
 */
export class SecretBoxError extends Error {
  readonly code = "GATEHOUSE_SECRET_UNREADABLE";
  readonly reason: SecretBoxFailure;
  readonly [BRAND] = true;
  constructor(reason: SecretBoxFailure, message: string) {
    super(message);
    this.name = "SecretBoxError";
    this.reason = reason;
  }

  /** Next.js evaluates server modules more than once: a brand, not the class, says what it is. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/**
 * Seals short secrets (OAuth tokens, client secrets) for the store with AES-256-GCM and opens them.
 *
 * A sealed value is one line of ASCII, `v1.<key id>.<nonce>.<ciphertext + 16-byte tag>`, each part
 * base64url without padding; the nonce is 12 random bytes per seal (random nonces are safe far
 * beyond the number of values a Gatehouse seals with one key: the bound is about 2^32 seals).
 * The `context` names the place the value belongs to (`oauth:<server>:refresh_token`) and is
 * authenticated with it, along with the version and key id: a value copied to another row or
 * field does not open there. Contexts are not secret and are not stored in the value.
 */
export class SecretBox {
  /** The id of the key values are sealed with (see `SecretKey.id`). */
  readonly keyId: string;
  readonly #key: KeyObject;

  constructor(key: SecretKey) {
    this.keyId = key.id;
    this.#key = key.material;
  }

  /**
   * A key of its own for `purpose` (HKDF-SHA256 of this box's key, the purpose as its info): as
   * secret as the key, and telling nothing of it or of a key derived for another purpose. What
   * replicas sign their internal requests with: they share the secret key already.
   */
  derive(purpose: string): KeyObject {
    checkContext(purpose);
    return createSecretKey(Buffer.from(hkdfSync("sha256", this.#key, Buffer.alloc(0), purpose, 32)));
  }

  /**
   * `plaintext` sealed for `context`. Throws a `TypeError` (a programming error, not bad data) for
   * an empty context or a string that is not well-formed Unicode (a lone surrogate would not come
   * back as it went in).
   */
  seal(plaintext: string, context: string): string {
    checkContext(context);
    if (LONE_SURROGATE.test(plaintext))
      throw new TypeError("a sealed value must be well-formed Unicode text");
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData(this.keyId, context));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return [VERSION, this.keyId, nonce.toString("base64url"), body.toString("base64url")].join(".");
  }

  /** The plaintext of `sealed`, sealed for `context` with this box's key; else {@link SecretBoxError}. */
  open(sealed: string, context: string): string {
    checkContext(context);
    const parts = sealed.split(".");
    const [version, keyId, nonceText, bodyText] = parts;
    if (parts.length === 4 && version !== VERSION && /^v[0-9]{1,4}$/.test(version ?? "")) {
      throw new SecretBoxError(
        "unsupported_version",
        `the sealed value for "${context}" is in format ${version}, which this Gatehouse cannot open`,
      );
    }
    const nonce = decode(nonceText);
    const body = decode(bodyText);
    if (
      parts.length !== 4 ||
      version !== VERSION ||
      keyId === undefined ||
      !KEY_ID.test(keyId) ||
      nonce?.length !== NONCE_BYTES ||
      body === null ||
      body.length < TAG_BYTES
    ) {
      throw new SecretBoxError("malformed", `the value stored for "${context}" is not a sealed value`);
    }
    if (keyId !== this.keyId) {
      throw new SecretBoxError(
        "other_key",
        `the value stored for "${context}" was sealed with another key (id ${keyId}; the current key is ` +
          `${this.keyId}): the key file or GATEHOUSE_SECRET_KEY changed since`,
      );
    }
    const decipher = createDecipheriv("aes-256-gcm", this.#key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(additionalData(keyId, context));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      const plain = Buffer.concat([
        decipher.update(body.subarray(0, body.length - TAG_BYTES)),
        decipher.final(),
      ]);
      return plain.toString("utf8");
    } catch {
      // The cause (OpenSSL's "Unsupported state or unable to authenticate data") adds nothing.
      throw new SecretBoxError(
        "not_authentic",
        `the value stored for "${context}" does not open: it was altered, or sealed for another place`,
      );
    }
  }
}

function checkContext(context: string): void {
  if (context.length === 0) throw new TypeError("a sealed value needs a context (where it is stored)");
}

/** Version, key id and context, NUL-separated: a context cannot pose as another id or version. */
function additionalData(keyId: string, context: string): Buffer {
  return Buffer.from(`${VERSION}\0${keyId}\0${context}`, "utf8");
}

/** Strict base64url without padding (the only form `seal` writes), or null. */
function decode(text: string | undefined): Buffer | null {
  if (text === undefined || !BASE64URL.test(text)) return null;
  const bytes = Buffer.from(text, "base64url");
  return bytes.toString("base64url") === text ? bytes : null;
}
