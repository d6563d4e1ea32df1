/** What the sign-in throttle tests share: one attempt settled, and the refusal of one. */
import { type LoginThrottle, TooManyAttempts } from "./access";

/** The refusal `attempt` ends in; fails the test when it was admitted. */
export async function refusal(attempt: Promise<unknown>): Promise<TooManyAttempts> {
  try {
    await attempt;
  } catch (err) {
    if (err instanceof TooManyAttempts) return err;
    throw err;
  }
  throw new Error("expected too_many_attempts");
}

/** One attempt by `name` (and `address`) at `now`, admitted and settled as `outcome`. */
export async function tryOnce(
  throttle: LoginThrottle,
  who: { name: string; address?: string | null },
  now: number,
  outcome: "failed" | "succeeded" = "failed",
): Promise<void> {
  const attempt = await throttle.begin({ name: who.name, address: who.address ?? null }, now);
  await attempt[outcome]();
}
