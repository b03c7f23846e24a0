// Makes e2b-mcp's MCP Bundles (.mcpb, for Claude Desktop) from the binaries of a goreleaser build in dist/
// (`make release-snapshot`, or a release): one bundle per system, each this folder's manifest.json with the
// build's version and that system's command, icon.png and the binary, checked with `mcpb validate` and packed with
// `mcpb pack` into dist/bundles/. Beside them it writes the MCP Registry entry of the build: the repository's
// server.json with each bundle's SHA-256, as the registry requires of an mcpb package.
//
// Usage (from the repository's root):
//
//	node packaging/bundle/build.mjs [dist]
//	node packaging/bundle/build.mjs --binary PATH --target GOOS_GOARCH --version VERSION OUT
//
// The second form makes the one bundle of a binary built with `go build` (`make bundle-dev`, which `make test`
// runs before the tests), in OUT/bundles/, and no registry entry: the bundle's checks then need no release build.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const mcpb = join(here, "node_modules", ".bin", "mcpb");

// Claude Desktop's names of the systems, which a bundle's compatibility.platforms lists.
const platforms = { darwin: "darwin", windows: "win32", linux: "linux" };

const readJSON = (path) => JSON.parse(readFileSync(path, "utf8"));
const template = readJSON(join(here, "manifest.json"));

// bundle packs the binary at path, built for goos/goarch, into out/<name>.mcpb and returns the bundle's name and
// SHA-256.
function bundle(path, goos, goarch, version, out) {
  const platform = platforms[goos];
  if (!platform) throw new Error(`no Claude Desktop platform for ${goos}`);
  const exe = goos === "windows" ? "e2b-mcp.exe" : "e2b-mcp";

  const stage = mkdtempSync(join(tmpdir(), "e2b-mcp-bundle-"));
  try {
    const manifest = structuredClone(template);
    manifest.version = version;
    manifest.server.entry_point = `server/${exe}`;
    manifest.server.mcp_config.command = "${__dirname}/server/" + exe;
    manifest.compatibility = { ...manifest.compatibility, platforms: [platform] };
    writeFileSync(join(stage, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
    copyFileSync(join(here, template.icon), join(stage, template.icon));
    mkdirSync(join(stage, "server"));
    copyFileSync(path, join(stage, "server", exe));
    // mcpb pack keeps each file's mode: the binary must stay executable where Claude Desktop unpacks it.
    chmodSync(join(stage, "server", exe), 0o755);

    // Named as the archives are, without the version (.goreleaser.yaml says why).
    const name = `e2b-mcp_${goos}_${goarch}.mcpb`;
    execFileSync(mcpb, ["validate", join(stage, "manifest.json")], { stdio: ["ignore", "inherit", "inherit"] });
    execFileSync(mcpb, ["pack", stage, join(out, name)], { stdio: ["ignore", "ignore", "inherit"] });
    const sha256 = createHash("sha256").update(readFileSync(join(out, name))).digest("hex");
    console.log(`${join(out, name)}  ${sha256}`);
    return { name, sha256 };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

function freshDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

const { values, positionals } = parseArgs({
  options: { binary: { type: "string" }, target: { type: "string" }, version: { type: "string" } },
  allowPositionals: true,
});

if (values.binary !== undefined) {
  const [goos, goarch] = (values.target ?? "").split("_");
  if (!goos || !goarch || !values.version || positionals.length !== 1) {
    throw new Error("usage: build.mjs --binary PATH --target GOOS_GOARCH --version VERSION OUT");
  }
  bundle(values.binary, goos, goarch, values.version, freshDir(join(positionals[0], "bundles")));
} else {
  const dist = positionals[0] ?? "dist";
  const { version } = readJSON(join(dist, "metadata.json"));
  const binaries = readJSON(join(dist, "artifacts.json")).filter((a) => a.type === "Binary");
  if (binaries.length === 0) {
    throw new Error(`no binaries in ${dist}/artifacts.json: run make release-snapshot first`);
  }
  const registryEntry = readJSON(join(here, "..", "..", "server.json"));
  const out = freshDir(join(dist, "bundles"));
  const sha256 = {};
  for (const b of binaries) {
    const made = bundle(b.path, b.goos, b.goarch, version, out);
    sha256[made.name] = made.sha256;
  }

  // server.json names the release's bundles by URL; this build's must be among them, and each gets its hash. A
  // snapshot's entry says the snapshot's version (it is for checking, never for publishing).
  for (const p of registryEntry.packages.filter((p) => p.registryType === "mcpb")) {
    p.identifier = p.identifier.replaceAll(registryEntry.version, version);
    p.version = version;
    const name = basename(new URL(p.identifier).pathname);
    if (!(name in sha256)) throw new Error(`server.json names ${p.identifier}, which this build did not make`);
    p.fileSha256 = sha256[name];
  }
  registryEntry.version = version;
  writeFileSync(join(out, "server.json"), JSON.stringify(registryEntry, null, 2) + "\n");
}
