import { readFileSync } from "node:fs";

/**
 * Security headers apply to every page and API response (server/main.ts sets the same list on
 * the routes it answers without Next). Next's own inline bootstrap scripts need 'unsafe-inline'
 * for script-src; everything else is same-origin only.
 * @type {{ key: string, value: string }[]}
 */
const securityHeaders = JSON.parse(
  readFileSync(new URL("./server/http/security-headers.json", import.meta.url), "utf8"),
);

/** @type {import('next').NextConfig} */
const nextConfig = {
  // NEXT_DIST_DIR lets two builds of one checkout live side by side (parallel work, CI); the
  // default is Next's own.
  distDir: process.env.NEXT_DIST_DIR ?? ".next",
  poweredByHeader: false,
  // forbidden(): a console page a person's roles do not open answers 403 (app/(console)/forbidden.tsx).
  experimental: { authInterrupts: true },
  serverExternalPackages: ["better-sqlite3"],
  // `npm start`'s first build (scripts/start.mjs) sets this: a user starting a released checkout
  // gains nothing from type-checking it (about 20 s of a two-core machine's first start), which
  // `npm run check` and `npm run build` still do.
  typescript: { ignoreBuildErrors: process.env.GATEHOUSE_BUILD_SKIP_TYPECHECK === "1" },
  async headers() {
    return [{ source: "/:path*", headers: securityHeaders }];
  },
};

export default nextConfig;
