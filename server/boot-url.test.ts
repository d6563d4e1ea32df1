import { describe, expect, it } from "vitest";
import { baseUrlFromEnv } from "./boot";

describe("the address the setup link is printed with", () => {
  it("is a name the Host check answers: loopback for a wildcard listen address", () => {
    expect(baseUrlFromEnv({ HOST: "0.0.0.0", PORT: "4000" })).toBe("http://127.0.0.1:4000");
    expect(baseUrlFromEnv({ HOST: "::", PORT: "4000" })).toBe("http://[::1]:4000");
    expect(baseUrlFromEnv({ HOST: "gate.internal", PORT: "80" })).toBe("http://gate.internal:80");
    expect(baseUrlFromEnv({})).toBe("http://127.0.0.1:3000");
    expect(baseUrlFromEnv({ GATEHOUSE_PUBLIC_ORIGIN: "https://gate.example.com/" })).toBe(
      "https://gate.example.com",
    );
  });
});
