import { describe, expect, it } from "vitest";
import { MAX_ROOTS } from "./server-roots";
import { check, http, messagesAt, onlyServer, stdio, withServers } from "./test-helpers";

const at = (name: string, rest = "") => `mcpServers.${name}.roots${rest}`;

describe("a server's roots", () => {
  it("are absent unless written; strings and {uri, name} objects both give roots, in the file's order", () => {
    expect(onlyServer(withServers({ a: stdio })).roots).toBeUndefined();
    expect(onlyServer(withServers({ a: { ...stdio, roots: [] } })).roots).toEqual([]);
    const server = onlyServer(
      withServers({
        a: {
          ...http,
          roots: [
            "file:///srv/notes",
            { uri: "file:///srv/my%20docs/", name: "Docs" },
            { uri: "file:///C:/Work" },
          ],
        },
      }),
    );
    expect(server.roots).toEqual([
      { uri: "file:///srv/notes" },
      { uri: "file:///srv/my%20docs/", name: "Docs" },
      { uri: "file:///C:/Work" },
    ]);
  });

  it("expand ${VAR} references in URIs and names, like args", () => {
    const result = check(
      {
        mcpServers: {
          a: { ...stdio, roots: ["${DATA}/notes", { uri: "file:///srv/${TEAM}", name: "${TEAM} files" }] },
        },
      },
      { DATA: "file:///var/data", TEAM: "ops" },
    );
    expect(onlyServer(result).roots).toEqual([
      { uri: "file:///var/data/notes" },
      { uri: "file:///srv/ops", name: "ops files" },
    ]);
  });

  it("an unset ${VAR} is an error on an enabled server and a warning on a dark one, reported once", () => {
    const enabled = withServers({ a: { ...stdio, enabled: true, roots: ["file:///${NOPE}/x"] } });
    expect(messagesAt(enabled.errors, at("a", "[0]"))).toEqual([
      expect.stringMatching(/^uses \$\{NOPE\}, which is not set; set NOPE in Gatehouse's environment/),
    ]);
    const dark = withServers({ a: { ...stdio, roots: ["file:///${NOPE}/x"] } });
    expect(dark.errors).toEqual([]);
    expect(messagesAt(dark.warnings, at("a", "[0]"))).toEqual([expect.stringMatching(/cannot be enabled/)]);
  });

  it("anything but an absolute file:// URI is refused at its JSON path, with the fix", () => {
    const result = withServers({
      a: {
        ...stdio,
        roots: [
          "/srv/notes",
          "https://example.com/notes",
          "file://srv/notes",
          "file:///srv/a/../etc",
          "file:///srv/my notes",
          "file:///srv/notes?x=1",
          "",
          42,
          { uri: "file:///srv/ok", name: "" },
          { name: "No uri" },
          { uri: "file:///srv/b", title: "B" },
        ],
      },
    });
    expect(result.config).toBeNull();
    const first = (rest: string) => messagesAt(result.errors, at("a", rest));
    expect(first("[0]")).toEqual([
      expect.stringMatching(/^"\/srv\/notes" is not an absolute file:\/\/ URI; roots are file:\/\/ URIs/),
    ]);
    expect(first("[1]")).toEqual([
      expect.stringMatching(/^"https:\/\/example.com\/notes" is not an absolute file:\/\/ URI/),
    ]);
    expect(first("[2]")).toEqual([
      expect.stringMatching(/no host: write three slashes, e.g. "file:\/\/\/srv\/notes"$/),
    ]);
    expect(first("[3]")).toEqual([
      expect.stringMatching(/not written as URL parsing gives it back \("file:\/\/\/srv\/etc"\)/),
    ]);
    expect(first("[4]")).toEqual([
      expect.stringMatching(/\("file:\/\/\/srv\/my%20notes"\).*write it in that form$/),
    ]);
    expect(first("[5]")).toEqual([expect.stringMatching(/has a query or fragment/)]);
    expect(first("[6]")).toEqual([
      expect.stringMatching(/^must be an absolute file:\/\/ URI .*, not an empty string$/),
    ]);
    expect(first("[7]")).toEqual([expect.stringMatching(/^must be a file:\/\/ URI like .*, not a number$/)]);
    expect(first("[8].name")).toEqual([expect.stringMatching(/^must be a non-empty string naming the root/)]);
    expect(first("[9].uri")).toEqual([expect.stringMatching(/^must be an absolute file:\/\/ URI/)]);
    expect(first("[10].title")).toEqual([expect.stringMatching(/^unknown key "title"/)]);
  });

  it("not an array, more than the most, or a URI twice is refused with the fix", () => {
    const many = Array.from({ length: MAX_ROOTS + 1 }, (_, i) => `file:///srv/r${i}`);
    const result = withServers({
      a: { ...stdio, roots: "file:///srv/notes" },
      b: { ...stdio, roots: many },
      c: { ...stdio, roots: ["file:///srv/notes", { uri: "file:///srv/notes", name: "Again" }] },
    });
    expect(messagesAt(result.errors, at("a"))).toEqual([
      expect.stringMatching(
        /^must be an array of file:\/\/ URIs, e.g. \["file:\/\/\/srv\/notes"\], not a string/,
      ),
    ]);
    expect(messagesAt(result.errors, at("b"))).toEqual([
      `lists 51 roots; at most 50 are allowed, so give a parent folder instead`,
    ]);
    expect(messagesAt(result.errors, at("c", "[1].uri"))).toEqual([
      '"file:///srv/notes" is listed twice; remove one',
    ]);
    expect(onlyServer(withServers({ a: { ...stdio, roots: many.slice(0, MAX_ROOTS) } })).roots).toHaveLength(
      MAX_ROOTS,
    );
  });

  it("a root of the whole filesystem is a warning; a misspelt key is named with the fix", () => {
    const whole = withServers({ a: { ...stdio, roots: ["file:///"] } });
    expect(whole.errors).toEqual([]);
    expect(messagesAt(whole.warnings, at("a", "[0]"))).toEqual([expect.stringMatching(/whole filesystem/)]);
    const typo = withServers({ a: { ...stdio, root: ["file:///srv"] } });
    expect(messagesAt(typo.errors, "mcpServers.a.root")).toEqual([
      'unknown key "root"; did you mean "roots"?',
    ]);
  });
});
