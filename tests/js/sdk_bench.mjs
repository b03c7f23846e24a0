// E2B's own JS SDK calling a sandbox's envd: the yardstick that tests/bench_test.go holds e2b-mcp's e2b_exec and
// e2b_write_file against. The sandbox already exists (the benchmark made it through e2b-mcp); the SDK connects
// to it with E2B_API_KEY at E2B_API_URL and reaches its envd at E2B_SANDBOX_URL, as it would a self-hosted E2B's.
//
//   node sdk_bench.mjs <sandbox ID> <sandbox path> <file with the content>
//
// Each line read from stdin is one call: "write" is a files.write of the content to the path, "exec" a
// commands.run of `true`. Each answer is a line with the nanoseconds the call took (from the call to its result)
// and what it returned (the path envd reports, or the exit code). stdin's end ends the script.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Sandbox } from "e2b";

const [sandboxId, path, contentFile] = process.argv.slice(2);
if (!contentFile || !process.env.E2B_API_URL || !process.env.E2B_SANDBOX_URL || !process.env.E2B_API_KEY) {
  process.stderr.write("usage: E2B_API_KEY=... E2B_API_URL=... E2B_SANDBOX_URL=... node sdk_bench.mjs ID PATH CONTENT_FILE\n");
  process.exit(2);
}
const content = readFileSync(contentFile, "utf8");
const sandbox = await Sandbox.connect(sandboxId);

for await (const line of createInterface({ input: process.stdin })) {
  const t0 = process.hrtime.bigint();
  let answer;
  if (line === "exec") {
    const res = await sandbox.commands.run("true");
    answer = { exitCode: res.exitCode };
  } else if (line === "write") {
    const info = await sandbox.files.write(path, content);
    answer = { path: info.path };
  } else {
    process.stderr.write(`unknown request ${JSON.stringify(line)}\n`);
    process.exit(2);
  }
  const ns = process.hrtime.bigint() - t0;
  process.stdout.write(JSON.stringify({ ns: Number(ns), ...answer }) + "\n");
}
