/**
 * The header through which `server/main.ts` tells a page which URL was asked for (path and
 * query). It sets it on every request it hands to Next, replacing whatever the client sent, so a
 * page can send a visitor without a session to sign-in and back (`server/http/page.ts`).
 */
export const PAGE_URL_HEADER = "x-gatehouse-page-url";
