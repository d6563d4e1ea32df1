import { describe, expect, it } from "vitest";
import { messagesAt, onlyServer, stdio, withServers } from "./test-helpers";

describe("a server's resources section", () => {
  it("is absent unless written, and then holds the owner's URI globs", () => {
    expect(onlyServer(withServers({ a: stdio })).resources).toBeUndefined();
    const server = onlyServer(
      withServers({ a: { ...stdio, resources: { allow: ["file:///srv/docs/*", "demo://static/?.md"] } } }),
    );
    expect(server.resources).toEqual({ allow: ["file:///srv/docs/*", "demo://static/?.md"] });
    expect(onlyServer(withServers({ a: { ...stdio, resources: {} } })).resources).toEqual({ allow: [] });
  });

  it("must be an object with an array of globs, and unknown keys are errors", () => {
    const result = withServers({
      a: { ...stdio, resources: ["file:///srv/*"] },
      b: { ...stdio, resources: { allow: "file:///srv/*" } },
      c: { ...stdio, resources: { templates: true, alow: [] } },
    });
    expect(messagesAt(result.errors, "mcpServers.a.resources")[0]).toMatch(/must be an object like/);
    expect(messagesAt(result.errors, "mcpServers.b.resources.allow")[0]).toMatch(
      /must be an array of URI globs/,
    );
    expect(messagesAt(result.errors, "mcpServers.c.resources.templates")[0]).toMatch(
      /templates are not passed/,
    );
    expect(messagesAt(result.errors, "mcpServers.c.resources.alow")[0]).toMatch(/did you mean "allow"/);
  });

  it("a glob that no URI could match is an error naming the fix", () => {
    const bad = [
      "",
      "/srv/docs/*",
      "FILE:///srv/*",
      "file:///srv/docs/../*",
      "file:///srv/my docs/*",
      "file:///srv/docs/%2e%2e/*",
      "file:///srv\\docs\\*",
      "file://localhost/srv/*",
      "file:///srv/\u200Bdocs/*",
      "file:///srv/docs/*",
      "file:///srv/docs/*",
    ];
    const result = withServers({ a: { ...stdio, resources: { allow: bad } } });
    const at = (i: number) => messagesAt(result.errors, `mcpServers.a.resources.allow[${i}]`)[0];
    expect(at(0)).toMatch(/not an empty string/);
    expect(at(1)).toMatch(/does not start with a lowercase URI scheme/);
    expect(at(2)).toMatch(/does not start with a lowercase URI scheme/);
    expect(at(3)).toMatch(/as URL parsing gives it back/);
    expect(at(4)).toMatch(/holds a space/);
    expect(at(5)).toMatch(/encoded/);
    expect(at(6)).toMatch(/backslash/);
    expect(at(7)).toMatch(/as URL parsing gives it back/);
    expect(at(8)).toMatch(/as URL parsing gives it back/);
    expect(at(9)).toBeUndefined();
    expect(at(10)).toMatch(/listed twice/);
  });

  it("at most 100 globs", () => {
    const allow = Array.from({ length: 101 }, (_, i) => `file:///srv/${i}/*`);
    const result = withServers({ a: { ...stdio, resources: { allow } } });
    expect(messagesAt(result.errors, "mcpServers.a.resources.allow")[0]).toMatch(/at most 100/);
  });

  it("a glob that admits a whole scheme is allowed with a warning", () => {
    const result = withServers({
      a: { ...stdio, resources: { allow: ["file:///*", "demo:*", "file:///srv/*"] } },
    });
    expect(result.errors).toEqual([]);
    expect(messagesAt(result.warnings, "mcpServers.a.resources.allow[0]")[0]).toMatch(
      /every "file:" URI this server will answer/,
    );
    expect(messagesAt(result.warnings, "mcpServers.a.resources.allow[1]")).toHaveLength(1);
    expect(messagesAt(result.warnings, "mcpServers.a.resources.allow[2]")).toEqual([]);
  });
});
