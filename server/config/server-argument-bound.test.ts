import { describe, expect, it } from "vitest";
import { ARGUMENT_LIMITS } from "../calls/argument-size";
import { ARGUMENT_BYTES } from "./server-fields";
import { http, messagesAt, onlyServer, stdio, withServers } from "./test-helpers";

const RANGE =
  /an integer from 1024 to 1048576 \(1 KiB to 1 MiB; a server's bound can only lower the global 1 MiB\)/;

describe("a server's maxArgumentBytes", () => {
  it("is absent unless written, and then bounds the server's calls, on stdio and HTTP servers alike", () => {
    expect(onlyServer(withServers({ a: stdio })).maxArgumentBytes).toBeUndefined();
    expect(onlyServer(withServers({ a: { ...stdio, maxArgumentBytes: 2048 } })).maxArgumentBytes).toBe(2048);
    expect(onlyServer(withServers({ a: { ...http, maxArgumentBytes: 1024 } })).maxArgumentBytes).toBe(1024);
    expect(onlyServer(withServers({ a: { ...stdio, maxArgumentBytes: 1048576 } })).maxArgumentBytes).toBe(
      1048576,
    );
  });

  it("0, 5 MiB, a fraction or a string is refused at its JSON path, with the allowed range", () => {
    const result = withServers({
      zero: { ...stdio, maxArgumentBytes: 0 },
      big: { ...stdio, maxArgumentBytes: 5 * 1024 * 1024 },
      small: { ...stdio, maxArgumentBytes: 1023 },
      half: { ...stdio, maxArgumentBytes: 2048.5 },
      text: { ...stdio, maxArgumentBytes: "2048" },
      word: { ...http, maxArgumentBytes: "64 KiB" },
    });
    expect(result.config).toBeNull();
    const at = (name: string) => messagesAt(result.errors, `mcpServers.${name}.maxArgumentBytes`);
    expect(at("zero")).toEqual([expect.stringMatching(/^0 is not allowed; use /)]);
    expect(at("big")).toEqual([expect.stringMatching(/^5242880 is not allowed; use /)]);
    expect(at("small")).toEqual([expect.stringMatching(/^1023 is not allowed; use /)]);
    expect(at("half")).toEqual([expect.stringMatching(/^2048.5 is not allowed; use /)]);
    expect(at("text")).toEqual([
      expect.stringMatching(/^must be an integer .*, not a string; write 2048 without quotes$/),
    ]);
    expect(at("word")).toEqual([expect.stringMatching(/^must be an integer .*, not a string$/)]);
    for (const name of ["zero", "big", "small", "half", "text", "word"]) {
      expect(at(name)[0]).toMatch(RANGE);
    }
    expect(at("zero")[0]).toMatch(/or leave it out to keep 1 MiB$/);
  });

  it("a misspelt key is still named with the fix", () => {
    const result = withServers({ a: { ...stdio, maxArgumentByte: 2048, maxArgumentsBytes: 2048 } });
    expect(messagesAt(result.errors, "mcpServers.a.maxArgumentByte")).toEqual([
      'unknown key "maxArgumentByte"; did you mean "maxArgumentBytes"?',
    ]);
    expect(messagesAt(result.errors, "mcpServers.a.maxArgumentsBytes")).toEqual([
      'unknown key "maxArgumentsBytes"; did you mean "maxArgumentBytes"?',
    ]);
  });

  it("can only lower the global bound: its most is exactly the global 1 MiB", () => {
    expect(ARGUMENT_BYTES.max).toBe(ARGUMENT_LIMITS.maxBytes);
  });
});
