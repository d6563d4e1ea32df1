/**
 * Secrets at rest: the key (GATEHOUSE_SECRET_KEY, or a 0600 key file beside the SQLite store;
 * on PostgreSQL GATEHOUSE_SECRET_KEY alone) and the box that seals values with it. Imports
 * nothing of `server/` but itself: any room may use it.
 */
export { SecretBox, SecretBoxError, type SecretBoxFailure } from "./box";
export {
  checkSecretKey,
  describeSecretKey,
  keyFilePath,
  loadSecretKey,
  SECRET_KEY_BYTES,
  SECRET_KEY_ENV,
  type SecretKey,
  SecretKeyError,
  type SecretKeyOptions,
  secretKeyValues,
} from "./key";
