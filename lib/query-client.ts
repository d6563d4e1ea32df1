import { QueryCache, QueryClient } from "@tanstack/react-query";
import { GatehouseError } from "@/lib/errors";

/** How long fetched data counts as fresh; live events invalidate sooner when something changes. */
export const STALE_TIME_MS = 5_000;
const MAX_RETRIES = 2;

function isClientError(error: unknown): boolean {
  return error instanceof GatehouseError && error.status >= 400 && error.status < 500;
}

/**
 * The one way to build the app's QueryClient: data stays fresh for 5 s, and a 4xx answer is
 * never retried (asking again will not change the server's mind; only 5xx and network errors
 * are). An expired session sends the browser back to the sign-in page.
 */
export function makeQueryClient(): QueryClient {
  return new QueryClient({
    queryCache: new QueryCache({
      onError(error) {
        if (
          typeof window !== "undefined" &&
          error instanceof GatehouseError &&
          error.code === "unauthenticated" &&
          window.location.pathname !== "/login"
        ) {
          window.location.assign("/login");
        }
      },
    }),
    defaultOptions: {
      queries: {
        staleTime: STALE_TIME_MS,
        refetchOnWindowFocus: true,
        retry: (failureCount, error) => !isClientError(error) && failureCount < MAX_RETRIES,
      },
      mutations: { retry: false },
    },
  });
}
