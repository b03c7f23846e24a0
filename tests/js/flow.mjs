// The core tool flow of e2b-mcp driven by the official TypeScript MCP SDK, over one transport:
//
//   node flow.mjs stdio <e2b-mcp binary> <serve args...>
//   node flow.mjs http  <base URL> <bearer token> [session]
//   node flow.mjs sse   <base URL> <bearer token> [session]
//
// Each step is checked here; a JSON line is printed per step, and the last line is {"ok":true,...} on success.
// Any failed check exits 1 with the reason on stderr. tests/js_test.go runs this and checks the outcome.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { check, fail, fields, makeTransport, step, textOf } from "./client.mjs";

const EXPECTED_TOOLS = [
  "e2b_create_sandbox", "e2b_exec", "e2b_read_file", "e2b_write_file", "e2b_list_sandboxes",
  "e2b_manage_sandbox", "e2b_checkpoint_sandbox", "e2b_list_checkpoints", "e2b_fork_sandbox",
  "e2b_delete_checkpoint",
];

async function main() {
  const { kind, transport } = makeTransport(process.argv.slice(2));
  const client = new Client({ name: "e2b-mcp-js-e2e", version: "1.0.0" });
  await client.connect(transport);
  step("connect", { transport: kind, server: client.getServerVersion()?.name });

  const call = async (name, args, options) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...options });
    check(!result.isError, `${name} ${JSON.stringify(args)} failed: ${textOf(result)}`);
    return fields(result);
  };

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  for (const want of EXPECTED_TOOLS) check(names.includes(want), `tools/list lacks ${want}: ${names}`);
  for (const t of tools) {
    check(t.inputSchema?.type === "object", `${t.name} has no object input schema`);
    check(typeof t.annotations?.readOnlyHint === "boolean", `${t.name} lacks readOnlyHint`);
  }
  step("list_tools", { count: tools.length });

  const created = await call("e2b_create_sandbox", { title: `js ${kind}` });
  const id = created.sandbox_id;
  check(typeof id === "string" && id.length > 0, `create answered no sandbox_id: ${JSON.stringify(created)}`);
  check(created.template === "base", `template is ${created.template}`);
  step("create", { sandbox_id: id, status: created.status });

  const path = "/home/user/js-notes.txt";
  const content = `written over ${kind}\nsecond line\n`;
  const written = await call("e2b_write_file", { sandbox_id: id, path, content });
  check(written.success === true, `write_file: ${JSON.stringify(written)}`);
  step("write_file", { path });

  const read = await call("e2b_read_file", { sandbox_id: id, path });
  check(read.content === content, `read_file gave ${JSON.stringify(read.content)}`);
  step("read_file", { bytes: read.content.length });

  // Progress notifications are asked for with a progress token (the SDK sets one when onprogress is given).
  let progress = 0;
  const exec = await call(
    "e2b_exec",
    { sandbox_id: id, command: "wc -l < js-notes.txt; echo to-stderr >&2; for i in 1 2 3; do echo tick $i; sleep 0.1; done; exit 3", cwd: "/home/user" },
    { onprogress: () => { progress++; } },
  );
  check(exec.exit_code === 3 && exec.success === false, `exec exit: ${JSON.stringify(exec)}`);
  check(exec.stdout.startsWith("2\n") && exec.stdout.includes("tick 3"), `exec stdout: ${JSON.stringify(exec.stdout)}`);
  check(exec.stderr.includes("to-stderr"), `exec stderr: ${JSON.stringify(exec.stderr)}`);
  step("exec", { exit_code: exec.exit_code, progress });

  const listed = await call("e2b_list_sandboxes", {});
  check(listed.sandboxes.some((s) => s.sandbox_id === id), `list lacks ${id}: ${JSON.stringify(listed)}`);
  check(listed.count === listed.sandboxes.length, `list count ${listed.count}`);
  step("list", { count: listed.count });

  for (const action of ["pause", "resume"]) {
    const r = await call("e2b_manage_sandbox", { sandbox_id: id, action });
    check(r.success === true && r.action === action, `${action}: ${JSON.stringify(r)}`);
    step(action, { sandbox_id: id });
  }

  const again = await call("e2b_read_file", { sandbox_id: id, path });
  check(again.content === content, `after resume read_file gave ${JSON.stringify(again.content)}`);

  // A missing required parameter is a tool error the model can read, not a protocol error.
  const missing = await client.callTool({ name: "e2b_exec", arguments: { sandbox_id: id } });
  check(missing.isError === true && textOf(missing).includes("Missing required parameter: command"),
    `missing parameter: ${textOf(missing)}`);
  step("missing_parameter", {});

  const deleted = await call("e2b_manage_sandbox", { sandbox_id: id, action: "delete" });
  check(deleted.success === true, `delete: ${JSON.stringify(deleted)}`);
  const after = await call("e2b_list_sandboxes", {});
  check(!after.sandboxes.some((s) => s.sandbox_id === id), `${id} still listed after delete`);
  step("delete", { sandbox_id: id });

  await client.close();
  step("done", { ok: true, sandbox_id: id, transport: kind, progress });
}

main().catch((err) => fail(err?.stack ?? String(err)));
