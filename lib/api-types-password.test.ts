/**
 * The password schema every place that sets a password uses (setup, `POST /api/users`, the CLI's
 * `user add`): a control character, the usual trace of `printf 'pw\npw'` piped into the CLI, is
 * refused with a message that says so, while signing in accepts any text.
 */
import { describe, expect, it } from "vitest";
import { CreateUserBody, password, SetupBody, SignInBody } from "./api-types";

const MESSAGE = "Passwords cannot contain control characters such as a newline.";

/** [what it is, a password long enough to pass every other check] */
const CONTROLS: [what: string, value: string][] = [
  ["a newline", "a-long-password\nsecond-line"],
  ["a carriage return", "a-long-password\r"],
  ["a tab", "a-long\tpassword"],
  ["NUL", "a-long-password\u0000"],
  ["an escape sequence", "\u001b[31ma-long-password"],
  ["DEL", "a-long-password\u007f"],
  ["C1 NEL", "a-long-password\u0085"],
  ["C1 CSI", "a-long-\u009bpassword"],
  ["the line separator U+2028", "a-long-password\u2028"],
  ["the paragraph separator U+2029", "a-long-\u2029password"],
];

describe("a password being set", () => {
  it.each(CONTROLS)("with %s is refused as containing a control character", (_what, value) => {
    const parsed = password.safeParse(value);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.message)).toEqual([MESSAGE]);
  });

  it("that is also too short names the control character first, the fix that matters", () => {
    const parsed = password.safeParse("pw\npw");
    expect(parsed.error?.issues[0]?.message).toBe(MESSAGE);
  });

  it.each([
    "correct horse battery",
    "pässwörd-mit-ümläuten",
    "🔑🔑🔑 a key and spaces",
    "non\u00a0breaking\u00a0space",
  ])("%j, printable text of any script, is accepted", (value) => {
    expect(password.safeParse(value).success).toBe(true);
  });

  it("is refused in the setup and new-user bodies, on the password field", () => {
    for (const schema of [SetupBody, CreateUserBody]) {
      const parsed = schema.safeParse({
        code: "c",
        name: "rita",
        roles: ["reviewer"],
        password: "a-long-password\n",
      });
      expect(parsed.error?.issues.map((i) => [i.path.join("."), i.message])).toEqual([["password", MESSAGE]]);
    }
  });

  it("signing in takes any text: a password with a newline simply never matches", () => {
    expect(SignInBody.safeParse({ name: "rita", password: "pw\npw" }).success).toBe(true);
  });
});
