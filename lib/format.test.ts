import { describe, expect, it } from "vitest";
import { capitalized, formatBytes, formatCountdown, formatDuration } from "./format";

describe("the expiry countdown", () => {
  it("counts minutes and seconds, rounding up so that it never shows 0:00 early", () => {
    expect(formatCountdown(900_000)).toBe("15:00");
    expect(formatCountdown(899_001)).toBe("15:00");
    expect(formatCountdown(59_000)).toBe("0:59");
    expect(formatCountdown(1)).toBe("0:01");
  });

  it("shows hours past an hour, and 0:00 once the deadline passed", () => {
    expect(formatCountdown(3_723_000)).toBe("1:02:03");
    expect(formatCountdown(0)).toBe("0:00");
    expect(formatCountdown(-5000)).toBe("0:00");
  });
});

describe("durations and sizes", () => {
  it("a duration reads in the largest fitting unit", () => {
    expect(formatDuration(12)).toBe("12 ms");
    expect(formatDuration(2400)).toBe("2.4 s");
    expect(formatDuration(5000)).toBe("5 s");
    expect(formatDuration(192_000)).toBe("3 min 12 s");
    expect(formatDuration(7_500_000)).toBe("2 h 5 min");
  });

  it("a duration leaves out a zero second or minute", () => {
    expect(formatDuration(900_000)).toBe("15 min");
    expect(formatDuration(7_200_000)).toBe("2 h");
    expect(formatDuration(61_000)).toBe("1 min 1 s");
  });

  it("a size reads in bytes, KiB or MiB", () => {
    expect(formatBytes(812)).toBe("812 B");
    expect(formatBytes(65_536)).toBe("64 KiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(1_258_291)).toBe("1.2 MiB");
  });
});

describe("sentences", () => {
  it("a phrase that stands alone starts with a capital letter, the rest as it was", () => {
    expect(capitalized("approved by rita")).toBe("Approved by rita");
    expect(capitalized("Already")).toBe("Already");
    expect(capitalized("")).toBe("");
  });
});
