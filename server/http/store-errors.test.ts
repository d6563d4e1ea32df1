import { DrizzleQueryError } from "drizzle-orm/errors";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { errorResponse } from "./route";

/** An error as a driver throws it: a message and a code (SQLSTATE, SQLite's or Node's). */
function driverError(code: string, message = `driver error ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

/** `err` as drizzle hands it on from a statement: wrapped, with the SQL and the driver's error as its cause. */
function fromQuery(err: unknown): Error {
  return new DrizzleQueryError(
    'update "calls" set "status" = $1 where "id" = $2',
    ["running", "c1"],
    err as Error,
  );
}

async function answer(res: Response) {
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, retryAfter: res.headers.get("retry-after"), ...body.error };
}

describe("the store's faults as the API's errors", () => {
  it("a PostgreSQL serialization failure or deadlock that outlived the retries is store_busy, with a retry hint", async () => {
    for (const code of ["40001", "40P01"]) {
      for (const err of [driverError(code), fromQuery(driverError(code))]) {
        const got = await answer(errorResponse(err, "postgres"));
        expect(got, code).toMatchObject({ status: 503, retryAfter: "1", code: "store_busy" });
        expect(got.message).not.toContain("update");
      }
    }
  });

  it("PostgreSQL out of reach is store_unavailable (503, Retry-After), never a 500", async () => {
    const faults = [
      driverError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5432"),
      driverError("57P01", "terminating connection due to administrator command"),
      driverError("08006", "connection failure"),
      new Error("Connection terminated unexpectedly"),
      // pg-pool's, when a new connection does not come up within connectionTimeoutMillis.
      new Error("Connection terminated due to connection timeout", {
        cause: new Error("Connection terminated"),
      }),
    ];
    for (const err of faults) {
      for (const thrown of [err, fromQuery(err)]) {
        const got = await answer(errorResponse(thrown, "postgres"));
        expect(got, err.message).toMatchObject({ status: 503, code: "store_unavailable" });
        expect(Number(got.retryAfter)).toBeGreaterThan(0);
        expect(got.message).not.toContain("5432");
      }
    }
  });

  it("SQLite's busy and full store are recognised also when drizzle wraps them", async () => {
    expect(await answer(errorResponse(fromQuery(driverError("SQLITE_BUSY")), "sqlite"))).toMatchObject({
      status: 503,
      retryAfter: "1",
      code: "store_busy",
    });
    expect(await answer(errorResponse(fromQuery(driverError("SQLITE_FULL")), "sqlite"))).toMatchObject({
      status: 507,
      code: "store_full",
    });
  });

  it("the API's own errors and other failures keep their answer", async () => {
    // A network fault is the store's only where the store is PostgreSQL.
    const refused = driverError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:5432");
    expect(await answer(errorResponse(refused, "sqlite"))).toMatchObject({
      status: 500,
      code: "internal",
      retryAfter: null,
    });
    // A GatehouseError says what it is, whatever its cause or its message.
    const own = new GatehouseError("upstream_timeout", "the tool server's connection timeout passed", {
      cause: driverError("ETIMEDOUT"),
    });
    expect(await answer(errorResponse(own, "postgres"))).toMatchObject({
      status: 504,
      code: "upstream_timeout",
    });
    const wrapped = new GatehouseError("internal", "do not repeat it", {
      cause: fromQuery(driverError("40001")),
    });
    expect(await answer(errorResponse(wrapped, "postgres"))).toMatchObject({ status: 500, retryAfter: null });
    // A bad query is a bug, not a busy store.
    expect(await answer(errorResponse(fromQuery(driverError("42703")), "postgres"))).toMatchObject({
      status: 500,
      code: "internal",
    });
  });
});
