// Stop that stops, with the official TypeScript SDK client: a call of `sleep SECONDS` is aborted (the SDK sends
// notifications/cancelled), and the command and everything it started must be gone from the sandbox long before
// they would end. The bound only ends a hang: it must be well below SECONDS, so that only the cancel can meet it.
//
//   node cancel.mjs <rounds> <bound ms> <seconds> stdio <e2b-mcp binary> <serve args...>
//   node cancel.mjs <rounds> <bound ms> <seconds> http  <base URL> <bearer token> [session]
//   node cancel.mjs <rounds> <bound ms> <seconds> sse   <base URL> <bearer token> [session]
//
// Before the first round, and before each round in turn, the session runs the calls that used to leave a cancel
// slow or lost: a big output, a command killed by timeout_ms, and a command streamed as progress. A JSON line is
// printed per round with how long after the abort the command was seen gone; the last line is {"ok":true,...}
// when every round was gone within the bound.
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { check, fail, fields, makeTransport, step, textOf } from "./client.mjs";

async function main() {
  const [roundsArg, boundArg, secondsArg, ...rest] = process.argv.slice(2);
  const rounds = Number(roundsArg), bound = Number(boundArg), seconds = Number(secondsArg);
  check(rounds > 0 && bound > 0 && seconds * 1000 > 2 * bound,
    "usage: cancel.mjs <rounds> <bound ms> <seconds, well past the bound> <transport...>");
  const { kind, transport } = makeTransport(rest);
  const client = new Client({ name: "e2b-mcp-js-cancel", version: "1.0.0" });
  await client.connect(transport);

  const call = async (name, args, options) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...options });
    check(!result.isError, `${name} ${JSON.stringify(args)} failed: ${textOf(result)}`);
    return fields(result);
  };
  const id = (await call("e2b_create_sandbox", { title: `cancel ${kind}` })).sandbox_id;

  const earlier = [
    async () => {
      const r = await call("e2b_exec", { sandbox_id: id, command: "seq 1 200000" });
      check(r.truncated === true, `seq 1 200000 was not cut: ${JSON.stringify(r).slice(0, 300)}`);
    },
    async () => {
      const r = await call("e2b_exec", { sandbox_id: id, command: "sleep 31 | cat; echo never", timeout_ms: 500 });
      check(r.success === false && /timeout/.test(r.error), `the timed-out command: ${JSON.stringify(r)}`);
    },
    async () => {
      let progress = 0;
      const r = await call("e2b_exec", { sandbox_id: id, command: "for i in $(seq 1 10); do echo tick $i; sleep 0.05; done" },
        { onprogress: () => { progress++; } });
      check(r.stdout.includes("tick 10") && progress > 0, `the streamed command: ${progress} notifications, ${JSON.stringify(r)}`);
    },
  ];
  for (const c of earlier) await c();

  // count is how many processes of the sandbox have marker in their command line; the pattern's first letter in
  // brackets keeps pgrep's own shell out of the count.
  const count = async (marker) => {
    const r = await call("e2b_exec", { sandbox_id: id, command: `pgrep -fc '[${marker[0]}]${marker.slice(1)}'; true` });
    return Number(r.stdout.trim());
  };

  let worst = 0;
  for (let round = 0; round < rounds; round++) {
    await earlier[round % earlier.length]();
    const marker = `cancel-${round}-${randomBytes(6).toString("hex")}`;
    const abort = new AbortController();
    const cancelled = client.callTool(
      { name: "e2b_exec", arguments: { sandbox_id: id, command: `(sleep ${seconds}; echo ${marker}) & sleep ${seconds}; echo ${marker}` } },
      undefined, { signal: abort.signal, timeout: 120000, onprogress: () => {} },
    ).then(() => "answered", (err) => `rejected: ${err?.message ?? err}`);
    for (let i = 0; (await count(marker)) < 2; i++) check(i < 200, `round ${round}: the command never started`);
    const abortedAt = performance.now();
    abort.abort("the user pressed Stop");
    let goneMs;
    for (;;) {
      const n = await count(marker);
      goneMs = performance.now() - abortedAt;
      if (n === 0) break;
      check(goneMs <= bound, `round ${round}: ${n} processes of the cancelled command still run after ${Math.round(goneMs)} ms`);
    }
    worst = Math.max(worst, goneMs);
    step("cancel", { round, gone_ms: Math.round(goneMs), call: await cancelled });
  }

  const r = await call("e2b_exec", { sandbox_id: id, command: "echo still here" });
  check(r.stdout === "still here\n", `a call after the cancels: ${JSON.stringify(r)}`);
  await call("e2b_manage_sandbox", { sandbox_id: id, action: "delete" });
  await client.close();
  step("done", { ok: true, sandbox_id: id, transport: kind, rounds, worst_ms: Math.round(worst) });
}

main().catch((err) => fail(err?.stack ?? String(err)));
