export type { SignInStart } from "./begin";
export type { SignInResult } from "./callback";
export type { AddressPolicy } from "./fetch";
export type { Revocation } from "./revoke";
export { CALLBACK_PATH, CLIENT_METADATA_PATH, REFRESH_MARGIN_MS, SIGN_IN_TTL_MS } from "./sign-in-state";
export { OAuthSignIns } from "./sign-ins";
