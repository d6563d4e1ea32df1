import { describe, expect, it } from "vitest";
import { newCallId } from "./ids";

describe("call ids", () => {
  it("are version 7 UUIDs carrying their creation time", () => {
    const id = newCallId(Date.UTC(2026, 10, 30, 12));
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16)).toBe(Date.UTC(2026, 10, 30, 12));
  });

  it("made later sort later, so the calls key grows at its right edge", () => {
    const ids = Array.from({ length: 50 }, (_, i) => newCallId(1_800_000_000_000 + i));
    expect([...ids].sort()).toEqual(ids);
  });

  it("made in the same millisecond still differ", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newCallId(1_800_000_000_000)));
    expect(ids.size).toBe(1000);
  });
});
