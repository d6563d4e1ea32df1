import { describe, expect, it } from "vitest";
import { GatehouseError } from "./errors";

class Narrower extends GatehouseError {
  constructor() {
    super("too_many_attempts", "narrower");
  }
}

describe("instanceof and GatehouseError", () => {
  it("any error branded as a GatehouseError is one, even from another copy of the module", () => {
    const copy = Object.assign(new Error("from another copy"), { [Symbol.for("gatehouse.error")]: true });
    expect(copy instanceof GatehouseError).toBe(true);
    expect(new Error("plain") instanceof GatehouseError).toBe(false);
  });

  it("a subclass answers for its own errors only, not for every GatehouseError", () => {
    expect(new Narrower() instanceof Narrower).toBe(true);
    expect(new Narrower() instanceof GatehouseError).toBe(true);
    expect(new GatehouseError("bad_request", "other") instanceof Narrower).toBe(false);
  });
});
