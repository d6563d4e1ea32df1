export type { AddressPolicy } from "./fetch";
export type { Revocation } from "./revoke";
export {
  CALLBACK_PATH,
  CLIENT_METADATA_PATH,
  OAuthSignIns,
  REFRESH_MARGIN_MS,
  SIGN_IN_TTL_MS,
  type SignInResult,
  type SignInStart,
} from "./sign-ins";
