// E2B's own JS SDK writing a file to a sandbox's envd: the yardstick that tests/bench_test.go holds e2b-mcp's
// e2b_write_file against. The sandbox already exists (the benchmark made it through e2b-mcp); the SDK connects
// to it with E2B_API_KEY at E2B_API_URL and reaches its envd at E2B_SANDBOX_URL, as it would a self-hosted E2B's.
//
//   node write_bench.mjs <sandbox ID> <sandbox path> <file with the content>
//
// Each line read from stdin is one files.write of the content; each answer is a line with the nanoseconds that
// write took (from the call to its result) and the size envd reports. stdin's end ends the script.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Sandbox } from "e2b";

const [sandboxId, path, contentFile] = process.argv.slice(2);
if (!contentFile || !process.env.E2B_API_URL || !process.env.E2B_SANDBOX_URL || !process.env.E2B_API_KEY) {
  process.stderr.write("usage: E2B_API_KEY=... E2B_API_URL=... E2B_SANDBOX_URL=... node write_bench.mjs ID PATH CONTENT_FILE\n");
  process.exit(2);
}
const content = readFileSync(contentFile, "utf8");
const sandbox = await Sandbox.connect(sandboxId);

for await (const _ of createInterface({ input: process.stdin })) {
  const t0 = process.hrtime.bigint();
  const info = await sandbox.files.write(path, content);
  const ns = process.hrtime.bigint() - t0;
  process.stdout.write(JSON.stringify({ ns: Number(ns), path: info.path }) + "\n");
}
