// e2b-mcp driven by the official TypeScript MCP client over stdio, as an assistant built on it calls the server:
// tests/bench_test.go holds it beside E2B's own JS SDK (sdk_bench.mjs) on the same envd. The script launches the
// server, creates a sandbox through it, and prints a first line with the sandbox's ID and the server's pid.
//
//   node mcp_bench.mjs <sandbox path> <file with the content> <e2b-mcp binary> <serve args...>
//
// Then each line read from stdin is one tool call, answered as sdk_bench.mjs answers: "write" is an
// e2b_write_file of the content to the path, "exec" an e2b_exec of `true`; each answer is a line with the
// nanoseconds the call took (from callTool to its result, the client's own encoding and parsing included) and
// what it returned (the path, or the exit code). stdin's end closes the client, which ends the server.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { check, fail, fields, makeTransport, textOf } from "./client.mjs";

const [path, contentFile, ...server] = process.argv.slice(2);
if (!contentFile || server.length === 0) {
  process.stderr.write("usage: node mcp_bench.mjs PATH CONTENT_FILE E2B_MCP_BINARY SERVE_ARGS...\n");
  process.exit(2);
}
const content = readFileSync(contentFile, "utf8");
const { transport } = makeTransport(["stdio", ...server]);
const client = new Client({ name: "e2b-mcp-bench", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  check(!res.isError, `${name}: ${textOf(res)}`);
  return fields(res);
}

const created = await call("e2b_create_sandbox", { title: "bench-ts" });
process.stdout.write(JSON.stringify({ sandbox: created.sandbox_id, pid: transport.pid }) + "\n");

for await (const line of createInterface({ input: process.stdin })) {
  const t0 = process.hrtime.bigint();
  let answer;
  if (line === "exec") {
    const out = await call("e2b_exec", { sandbox_id: created.sandbox_id, command: "true" });
    answer = { exitCode: out.exit_code };
  } else if (line === "write") {
    const out = await call("e2b_write_file", { sandbox_id: created.sandbox_id, path, content });
    check(out.success === true, `e2b_write_file: ${JSON.stringify(out)}`);
    answer = { path: out.path };
  } else {
    fail(`unknown request ${JSON.stringify(line)}`);
  }
  const ns = process.hrtime.bigint() - t0;
  process.stdout.write(JSON.stringify({ ns: Number(ns), ...answer }) + "\n");
}
await client.close();
