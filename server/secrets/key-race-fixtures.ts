/**
 * One racer for the key-file tests, as a real process: loads the secret key of the store named by
 * argv[2] the moment a line arrives on stdin, so the test can start two and release them together.
 * Prints `READY` once loaded and waiting, then `{"id", "created"}` as JSON (or `ERROR <message>`).
 * Run with `node --conditions=react-server --import tsx server/secrets/key-race-fixtures.ts DB`.
 */
import { createInterface } from "node:readline";
import { loadSecretKey } from "./key";

const dbFile = process.argv[2];
if (!dbFile) throw new Error("usage: key-race-fixtures.ts DB_FILE");
const lines = createInterface({ input: process.stdin });
lines.once("line", () => {
  try {
    const key = loadSecretKey({ env: {}, dbFile });
    process.stdout.write(`${JSON.stringify({ id: key.id, created: key.created })}\n`);
  } catch (err) {
    process.stdout.write(`ERROR ${err instanceof Error ? err.message : String(err)}\n`);
  }
  lines.close();
});
process.stdout.write("READY\n");
