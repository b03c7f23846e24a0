// What a sandbox makes, seen through the official TypeScript MCP SDK over streamable HTTP: a chart drawn by
// python3 comes back as image content, an oversized image gets a clear answer, sandbox files are resources (and
// another owner's are not), and download/upload links work with a plain HTTP client until they expire.
//
//   node files.mjs <base URL> <token of owner A> <token of owner B>
//
// A JSON line is printed per step; the last line is {"step":"done","ok":true,...}. Any failed check exits 1 with
// the reason on stderr. tests/files_test.go runs this.
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function fail(message) {
  process.stderr.write(`files.mjs: ${message}\n`);
  process.exit(1);
}

function check(cond, message) {
  if (!cond) fail(message);
}

function step(name, data) {
  process.stdout.write(JSON.stringify({ step: name, ...data }) + "\n");
}

const textOf = (result) => (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function connect(base, token) {
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", base), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "e2b-mcp-js-files", version: "1.0.0" });
  await client.connect(transport);
  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
    check(!result.isError, `${name} ${JSON.stringify(args)} failed: ${textOf(result)}`);
    return result;
  };
  return { client, call };
}

// A bar chart drawn pixel by pixel, written as a PNG with zlib and struct: the sandbox has python3 but no plotting
// library. It prints the PNG's sha256.
const CHART = String.raw`
import hashlib, struct, zlib
W, H = 640, 400
px = bytearray(b"\xff" * (W * H * 3))
def rect(x0, y0, x1, y1, rgb):
    for y in range(max(y0, 0), min(y1, H)):
        row = y * W * 3
        for x in range(max(x0, 0), min(x1, W)):
            px[row + 3 * x: row + 3 * x + 3] = rgb
rect(40, 20, 42, 370, b"\x00\x00\x00")   # y axis
rect(40, 368, 620, 370, b"\x00\x00\x00")  # x axis
for i, v in enumerate([120, 260, 180, 330, 90, 220]):
    rect(60 + i * 92, 368 - v, 60 + i * 92 + 60, 368, bytes([30 + 35 * i, 110, 220 - 30 * i]))
raw = b"".join(b"\x00" + bytes(px[y * W * 3:(y + 1) * W * 3]) for y in range(H))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) + \
      chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
open("chart.png", "wb").write(png)
print(hashlib.sha256(png).hexdigest())
`;

// A 20 MB PNG of noise, stored without compression.
const HUGE = String.raw`
import os, struct, zlib
W, H = 2600, 2600
raw = b"".join(b"\x00" + os.urandom(W * 3) for _ in range(H))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
open("huge.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) +
                             chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b""))
print(os.path.getsize("huge.png"))
`;

async function main() {
  const [base, tokenA, tokenB] = process.argv.slice(2);
  check(base && tokenA && tokenB, "usage: files.mjs <base URL> <token A> <token B>");
  const a = await connect(base, tokenA);
  const b = await connect(base, tokenB);

  const id = (await a.call("e2b_create_sandbox", { title: "js files" })).structuredContent.sandbox_id;
  check(typeof id === "string" && id.length > 0, "create answered no sandbox_id");
  step("create", { sandbox_id: id });

  // The chart, drawn in the sandbox, comes back as image content that decodes to the very same PNG.
  await a.call("e2b_write_file", { sandbox_id: id, path: "chart.py", content: CHART });
  const drawn = (await a.call("e2b_exec", { sandbox_id: id, command: "python3 chart.py" })).structuredContent;
  check(drawn.success, `chart.py: ${JSON.stringify(drawn)}`);
  const chartSHA = drawn.stdout.trim();
  const read = await a.call("e2b_read_file", { sandbox_id: id, path: "chart.png" });
  const images = read.content.filter((c) => c.type === "image");
  check(images.length === 1 && images[0].mimeType === "image/png", `read_file content: ${JSON.stringify(read.content.map((c) => c.type))}`);
  const png = Buffer.from(images[0].data, "base64");
  check(png.subarray(0, 8).equals(Buffer.from("\x89PNG\r\n\x1a\n", "latin1")), "image content is not a PNG");
  check(sha256(png) === chartSHA, `image content sha256 ${sha256(png)}, the file's ${chartSHA}`);
  const info = read.structuredContent.image;
  check(info.width === 640 && info.height === 400 && info.scaled === false && info.bytes === png.length,
    `image fields: ${JSON.stringify(read.structuredContent)}`);
  step("image", { bytes: png.length, sha256: chartSHA });

  // A 20 MB image: a clear answer, not a truncated picture.
  await a.call("e2b_write_file", { sandbox_id: id, path: "huge.py", content: HUGE });
  const made = (await a.call("e2b_exec", { sandbox_id: id, command: "python3 huge.py", timeout_ms: 120000 })).structuredContent;
  check(made.success && Number(made.stdout) > 20_000_000, `huge.png: ${JSON.stringify(made)}`);
  const huge = await a.client.callTool({ name: "e2b_read_file", arguments: { sandbox_id: id, path: "huge.png" } });
  const hugeText = textOf(huge);
  check(huge.isError === true && !huge.content.some((c) => c.type === "image") &&
    hugeText.includes("is a PNG image of") && hugeText.includes("smaller copy"), `20 MB image: ${hugeText}`);
  step("huge_image", { answer: hugeText.slice(0, 120) });

  // Sandbox files as resources: the template, the workspace in the list, a directory, a file.
  const { resourceTemplates } = await a.client.listResourceTemplates();
  check(resourceTemplates.some((t) => t.uriTemplate === "e2b://sandbox/{sandbox_id}/{+path}"), `templates: ${JSON.stringify(resourceTemplates)}`);
  const workspace = `e2b://sandbox/${id}/home/user/`;
  const { resources } = await a.client.listResources();
  check(resources.some((r) => r.uri === workspace), `resources/list: ${JSON.stringify(resources)}`);
  const listing = (await a.client.readResource({ uri: workspace })).contents[0];
  const chartURI = `e2b://sandbox/${id}/home/user/chart.png`;
  check(listing.mimeType === "text/uri-list" && listing.text.split("\r\n").includes(chartURI), `workspace listing: ${JSON.stringify(listing)}`);
  const blob = (await a.client.readResource({ uri: chartURI })).contents[0];
  check(blob.mimeType === "image/png" && sha256(Buffer.from(blob.blob, "base64")) === chartSHA, `chart resource: ${blob.mimeType}`);
  const script = (await a.client.readResource({ uri: `e2b://sandbox/${id}/home/user/chart.py` })).contents[0];
  check(script.text === CHART, "chart.py as a text resource differs");
  step("resources", { listed: resources.length });

  // Another owner: not in their list, and refused when named.
  const bList = (await b.client.listResources()).resources;
  check(!bList.some((r) => r.uri.includes(id)), `owner B lists A's sandbox: ${JSON.stringify(bList)}`);
  let refused = "";
  try {
    await b.client.readResource({ uri: chartURI });
  } catch (err) {
    refused = String(err?.message ?? err);
  }
  check(refused.includes(`Sandbox '${id}' not found`), `owner B read A's file: ${refused || "it succeeded"}`);
  const bLink = await b.client.callTool({ name: "e2b_download_url", arguments: { sandbox_id: id, path: "chart.png" } });
  check(bLink.isError === true && textOf(bLink).includes("not found"), `owner B got a link: ${textOf(bLink)}`);
  step("other_owner", { refused: refused.slice(0, 80) });

  // A download link, fetched as a browser would: the bytes, then nothing once it has expired.
  const dl = (await a.call("e2b_download_url", { sandbox_id: id, path: "chart.png", expires_in_seconds: 2 })).structuredContent;
  const got = await fetch(dl.url);
  const body = Buffer.from(await got.arrayBuffer());
  check(got.status === 200 && sha256(body) === chartSHA, `download link: HTTP ${got.status}, ${body.length} bytes`);
  let expired = 0;
  for (let i = 0; i < 50 && expired !== 401; i++) {
    await sleep(200);
    expired = (await fetch(dl.url)).status;
  }
  check(expired === 401, `the link still answers ${expired} after it expired`);
  step("download_link", { status: got.status, expired });

  // An upload link takes bytes straight into the sandbox.
  const ul = (await a.call("e2b_upload_url", { sandbox_id: id, path: "uploads/copy.png" })).structuredContent;
  const put = await fetch(ul.url, { method: "POST", headers: { "Content-Type": "application/octet-stream" }, body: png });
  check(put.status === 200, `upload link: HTTP ${put.status} ${await put.text()}`);
  const sum = (await a.call("e2b_exec", { sandbox_id: id, command: "sha256sum uploads/copy.png" })).structuredContent;
  check(sum.stdout.startsWith(chartSHA), `uploaded file: ${sum.stdout}`);
  step("upload_link", { status: put.status });

  await a.call("e2b_manage_sandbox", { sandbox_id: id, action: "delete" });
  await a.client.close();
  await b.client.close();
  step("done", { ok: true, sandbox_id: id });
}

main().catch((err) => fail(err?.stack ?? String(err)));
