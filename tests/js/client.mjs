// What the scripts here share: a TypeScript SDK client transport for e2b-mcp over stdio, streamable HTTP or SSE,
// and the checks and output of a scripted flow.
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

export function fail(message) {
  process.stderr.write(`${process.argv[1]}: ${message}\n`);
  process.exit(1);
}

export function check(cond, message) {
  if (!cond) fail(message);
}

// makeTransport reads the transport from argv:
//
//   stdio <e2b-mcp binary> <serve args...>
//   http  <base URL> [bearer token] [session]
//   sse   <base URL> [bearer token] [session]
//
// An empty token sends no Authorization header (a server on loopback without tokens).
export function makeTransport(argv) {
  const [kind, target, ...rest] = argv;
  switch (kind) {
    case "stdio":
      check(target, "stdio needs the binary path");
      // The whole environment: the server needs the D-Bus session address to reach the keyring.
      return { kind, transport: new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" }) };
    case "http":
    case "sse": {
      const [token, session] = rest;
      check(target, `${kind} needs a base URL`);
      const headers = token ? { Authorization: `Bearer ${token}` } : {};
      if (session) headers["X-E2B-MCP-Session"] = session;
      const requestInit = { headers };
      const transport = kind === "http"
        ? new StreamableHTTPClientTransport(new URL("/mcp", target), { requestInit })
        : new SSEClientTransport(new URL("/sse", target), { requestInit });
      return { kind, transport };
    }
    default:
      fail(`unknown transport ${kind}`);
  }
}

// fields returns a tool result's structured content, or its text parsed as JSON.
export function fields(result) {
  if (result.structuredContent && typeof result.structuredContent === "object") return result.structuredContent;
  const text = textOf(result);
  try {
    return JSON.parse(text);
  } catch {
    fail(`result is neither structured nor JSON: ${text}`);
  }
}

export function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

// step prints one JSON line; the Go side reads the last one.
export function step(name, data) {
  process.stdout.write(JSON.stringify({ step: name, ...data }) + "\n");
}
