import { describe, expect, it } from "vitest";
import { checkAuthorizationUrl } from "./begin";

describe("the browser is sent only to an https authorization endpoint", () => {
  it("takes https anywhere and plain http on loopback only", () => {
    for (const ok of [
      "https://as.example/authorize",
      "http://127.0.0.1:4000/auth",
      "http://localhost/auth",
      "http://[::1]/auth",
    ]) {
      expect(() => checkAuthorizationUrl(new URL(ok)), ok).not.toThrow();
    }
  });

  it("refuses plain http to a remote host and any other scheme", () => {
    expect(() => checkAuthorizationUrl(new URL("http://as.example/authorize"))).toThrow(
      /plain http on a remote host/,
    );
    expect(() => checkAuthorizationUrl(new URL("javascript:alert(1)"))).toThrow(/uses javascript:/);
    expect(() => checkAuthorizationUrl(new URL("data:text/html,hi"))).toThrow(/uses data:/);
  });
});
