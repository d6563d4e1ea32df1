/**
 * Who the notifier mails (PRODUCT.md §10) and how an address is stored: `reviewerEmails` and
 * `normalizeEmail` over a real, migrated store (SQLite in memory, or PostgreSQL in that project).
 */
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { memoryDb } from "@/test/support/catalogue";
import { createUser, normalizeEmail, reviewerEmails, setUserEmail } from "./users";

const PASSWORD = "correct horse battery";

describe("reviewerEmails", () => {
  it("lists reviewers with an address in name order, leaving out owners-only, address-less people and `except`", async () => {
    const db = await memoryDb();
    await createUser(db, {
      name: "zoe",
      password: PASSWORD,
      roles: ["reviewer"],
      email: "zoe@example.com",
      actor: "t",
    });
    await createUser(db, {
      name: "amy",
      password: PASSWORD,
      roles: ["owner", "reviewer"],
      email: "amy@example.com",
      actor: "t",
    });
    await createUser(db, {
      name: "olga",
      password: PASSWORD,
      roles: ["owner"],
      email: "olga@example.com",
      actor: "t",
    });
    await createUser(db, { name: "rex", password: PASSWORD, roles: ["reviewer"], actor: "t" });
    await createUser(db, {
      name: "rita",
      password: PASSWORD,
      roles: ["reviewer"],
      email: "rita@example.com",
      actor: "t",
    });

    expect(await reviewerEmails(db)).toEqual([
      { name: "amy", email: "amy@example.com" },
      { name: "rita", email: "rita@example.com" },
      { name: "zoe", email: "zoe@example.com" },
    ]);
    expect((await reviewerEmails(db, { except: "rita" })).map((r) => r.name)).toEqual(["amy", "zoe"]);
    expect(await reviewerEmails(db, { except: "nobody" })).toHaveLength(3);
  });

  it("follows addresses set and cleared later", async () => {
    const db = await memoryDb();
    await createUser(db, { name: "rex", password: PASSWORD, roles: ["reviewer"], actor: "t" });
    expect(await reviewerEmails(db)).toEqual([]);
    await setUserEmail(db, { name: "rex", email: "rex@example.com", actor: "olga" });
    expect(await reviewerEmails(db)).toEqual([{ name: "rex", email: "rex@example.com" }]);
    await setUserEmail(db, { name: "rex", email: "", actor: "olga" });
    expect(await reviewerEmails(db)).toEqual([]);
  });
});

describe("normalizeEmail", () => {
  it("trims, lower-cases the domain only, and turns empty into null", () => {
    expect(normalizeEmail("  Rita.Q@Mail.Example.COM\n")).toBe("Rita.Q@mail.example.com");
    expect(normalizeEmail("")).toBeNull();
    expect(normalizeEmail("   ")).toBeNull();
    expect(normalizeEmail(undefined)).toBeNull();
    expect(normalizeEmail(null)).toBeNull();
  });

  it("refuses what the API refuses, naming the field", async () => {
    for (const bad of ["rita", "rita@example", "a@b@c.example", "rita @example.com"]) {
      expect(() => normalizeEmail(bad), bad).toThrow(GatehouseError);
      expect(() => normalizeEmail(bad), bad).toThrow(/^email: Use an address like name@example\.com\.$/);
    }
    // createUser checks before writing anything.
    const db = await memoryDb();
    await expect(
      createUser(db, { name: "rex", password: PASSWORD, roles: ["reviewer"], email: "rex", actor: "t" }),
    ).rejects.toMatchObject({ code: "bad_request" });
    expect(await reviewerEmails(db)).toEqual([]);
  });
});
