import { describe, expect, it } from "vitest";
import { redact, registerSecrets } from "./log";
import { envSecrets } from "./runtime";

describe("which env values of a server are redacted", () => {
  it("a short value is a secret only under a credential's name, so our own counts stay readable", () => {
    const env = {
      DEBUG: "1",
      LOG_LEVEL: "on",
      API_KEY: "k9",
      DB_PASSWORD: "pw",
      STATE_FILE: "/srv/state.json",
    };
    expect(envSecrets(env).sort()).toEqual(["/srv/state.json", "k9", "pw"]);
    registerSecrets(envSecrets(env));
    expect(redact('server demo ready {"tools":1} mode: on')).toBe('server demo ready {"tools":1} mode: on');
    expect(redact("dial failed: key=k9 password=pw")).toBe("dial failed: key=[redacted] password=[redacted]");
  });
});
