import { describe, expect, it } from "vitest";
import { BACKOFF, backoffDelay } from "./supervision";

/** Jitter draws from [0, 1): 0 gives the lower bound, just under 1 the upper one. */
const LOW = 0;
const HIGH = 1 - Number.EPSILON;

describe("backoffDelay", () => {
  it("starts at the 1 s base and doubles with each attempt (no jitter at random = 1)", () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, HIGH))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 32_000,
    ]);
    expect(BACKOFF).toEqual({ baseMs: 1000, capMs: 60_000 });
  });

  it("is capped at 60 s from the 7th attempt on, even for huge attempt numbers", () => {
    expect(backoffDelay(7, HIGH)).toBe(60_000);
    expect(backoffDelay(8, HIGH)).toBe(60_000);
    expect(backoffDelay(1100, HIGH)).toBe(60_000); // 2 ** 1099 is Infinity: still the cap
    expect(backoffDelay(1100, LOW)).toBe(30_000);
  });

  it("jitter keeps the delay within [50 %, 100 %] of the exponential step", () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const step = Math.min(60_000, 1000 * 2 ** (attempt - 1));
      expect(backoffDelay(attempt, LOW)).toBe(step / 2);
      expect(backoffDelay(attempt, HIGH)).toBe(step);
      for (const r of [0.1, 0.25, 0.5, 0.75, 0.9]) {
        const d = backoffDelay(attempt, r);
        expect(d).toBeGreaterThanOrEqual(step / 2);
        expect(d).toBeLessThanOrEqual(step);
        expect(d).toBe(Math.round(step * (0.5 + r / 2)));
      }
    }
  });

  it("the first retry is between 500 ms and 1 s", () => {
    expect(backoffDelay(1, LOW)).toBe(500);
    expect(backoffDelay(1, 0.5)).toBe(750);
    expect(backoffDelay(1, HIGH)).toBe(1000);
  });

  it("treats attempt 0 or below as the first attempt", () => {
    expect(backoffDelay(0, HIGH)).toBe(1000);
    expect(backoffDelay(-3, LOW)).toBe(500);
  });

  it("uses Math.random when no jitter source is given, staying within the bounds", () => {
    for (let i = 0; i < 200; i++) {
      const d = backoffDelay(3);
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
      expect(Number.isInteger(d)).toBe(true);
    }
  });
});
