/**
 * Preloaded into every process under `npm start` when GATEHOUSE_BENCH_PROFILE names a directory
 * (bench/gatehouse.ts puts it in NODE_OPTIONS, which refuses `--cpu-prof` itself): in the server
 * bundle's process only, it runs the V8 CPU profiler from the first line and writes
 * `<dir>/server-<pid>.cpuprofile` (Chrome DevTools' format) when the process exits. Also a heap
 * snapshot on SIGUSR2 (`<dir>/server-<pid>-<n>.heapsnapshot`, after `process.memoryUsage()` on stderr),
 * for what grows.
 */
const fs = require("node:fs");
const path = require("node:path");
const inspector = require("node:inspector");
const v8 = require("node:v8");

const dir = process.env.GATEHOUSE_BENCH_PROFILE;
if (dir && /gatehouse-server\.mjs$/.test(process.argv[1] ?? "")) {
  const session = new inspector.Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 200 });
  session.post("Profiler.start");
  let snapshots = 0;
  process.on("SIGUSR2", () => {
    snapshots += 1;
    const file = path.join(dir, `server-${process.pid}-${snapshots}.heapsnapshot`);
    process.stderr.write(`memory before snapshot ${file}: ${JSON.stringify(process.memoryUsage())}\n`);
    v8.writeHeapSnapshot(file);
  });
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    // An in-process session answers synchronously: the profile is written before this returns.
    session.post("Profiler.stop", (err, result) => {
      if (!err) {
        fs.writeFileSync(path.join(dir, `server-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
      }
    });
  };
  // At the stop signal, before the server's own shutdown, which a slow machine may not finish
  // before the benchmark's SIGKILL; at exit for any other end.
  process.prependListener("SIGTERM", write);
  process.prependListener("SIGINT", write);
  process.on("exit", write);
}
