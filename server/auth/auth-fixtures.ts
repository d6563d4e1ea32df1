/**
 * What the authentication and authorisation tests share: a real test runtime per test, stopped
 * after it, and the checks on the error body and the Set-Cookie header that every file makes.
 */
import { afterEach, expect } from "vitest";
import { bodyOf, startTestRuntime, type TestRuntime } from "@/test/support/runtime";

type ErrorBody = { error: { code: string; message: string } };

/**
 * Registers an afterEach that stops the runtime of the test, and returns `start`, which starts
 * that runtime (one per test; call it once at the top of a test file, before its describes).
 */
export function runtimePerTest(): () => Promise<TestRuntime> {
  let t: TestRuntime | undefined;

  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  return async function start(): Promise<TestRuntime> {
    t = await startTestRuntime();
    return t;
  };
}

/** Checks that `res` is `status` in the one error shape with `code`; resolves with its message. */
export async function expectError(res: Response, status: number, code: string): Promise<string> {
  expect(res.status).toBe(status);
  const body = await bodyOf<ErrorBody>(res);
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}

/** `name=value` of a Set-Cookie header, and its attributes. */
export function parseSetCookie(header: string | null): { pair: string; value: string; attrs: string[] } {
  expect(header).not.toBeNull();
  const [pair = "", ...attrs] = (header ?? "").split(";").map((s) => s.trim());
  return { pair, value: pair.slice(pair.indexOf("=") + 1), attrs };
}

/** A password for the tests that create users through the API. */
export const STRONG = "correct horse battery";
