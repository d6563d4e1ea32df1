/** The stderr tail owners are shown: redacted before it is cut, one stderr line per entry. */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { registerSecrets } from "../log";
import { LineRing } from "./stdio-transport";

it("a secret a server prints where its stderr line is cut is redacted whole, never left half shown", () => {
  const secret = `sk_${randomUUID()}`;
  registerSecrets([secret]);
  const ring = new LineRing(10, 100);
  // Written in pieces, the secret straddling the 100-character cut; then a line still growing.
  ring.push(`${"x".repeat(95)}${secret.slice(0, 10)}`);
  ring.push(`${secret.slice(10)} tail\n${"y".repeat(98)}${secret}`);
  const [cut, growing] = ring.snapshot();
  expect(cut).toBe(`${"x".repeat(95)}[reda…`);
  expect(growing).toBe(`${"y".repeat(98)}[r…`);
  for (const line of ring.snapshot()) expect(line).not.toContain(secret.slice(0, 4));
});

it("a stderr line cannot redraw itself where it is shown: CRLF endings dropped, control characters escaped", () => {
  const ring = new LineRing();
  ring.push("windows line\r\nprogress 10%\rdone\u001b[2K\tindented\n");
  expect(ring.snapshot()).toEqual(["windows line", "progress 10%\\rdone\\u001b[2K\tindented"]);
});
