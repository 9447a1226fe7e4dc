// Packs one orchestra binary into an MCP Bundle for its platform:
//
//   node packaging/mcpb/pack.mjs BINARY GOOS GOARCH VERSION OUT.mcpb
//
// The bundle holds manifest.json (this directory's, with the build's version
// and platform filled in) and the binary as server/orchestra (orchestra.exe
// on Windows). The manifest is checked with `mcpb validate` and the bundle
// made with `mcpb pack`. GoReleaser runs this after each build.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const mcpb = join(here, "node_modules", ".bin", "mcpb");

// The platform names of the manifest, by GOOS.
const platforms = { darwin: "darwin", linux: "linux", windows: "win32" };

function fail(msg) {
  console.error(`pack.mjs: ${msg}`);
  process.exit(2);
}

const [binary, goos, goarch, version, out] = process.argv.slice(2);
if (!out) {
  fail("usage: node packaging/mcpb/pack.mjs BINARY GOOS GOARCH VERSION OUT.mcpb");
}
if (!platforms[goos]) {
  fail(`GOOS ${goos} has no MCP Bundle platform: want one of ${Object.keys(platforms).join(", ")}`);
}
if (!existsSync(mcpb)) {
  fail(`${mcpb} is missing: run npm ci in ${here} first`);
}

const manifest = JSON.parse(readFileSync(join(here, "manifest.json"), "utf8"));
const exe = goos === "windows" ? "orchestra.exe" : "orchestra";
manifest.version = version;
manifest.server.entry_point = `server/${exe}`;
manifest.compatibility = { ...manifest.compatibility, platforms: [platforms[goos]] };

const stage = mkdtempSync(join(tmpdir(), `orchestra-mcpb-${goos}-${goarch}-`));
try {
  mkdirSync(join(stage, "server"));
  writeFileSync(join(stage, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n");
  copyFileSync(binary, join(stage, "server", exe));
  chmodSync(join(stage, "server", exe), 0o755);
  execFileSync(mcpb, ["validate", join(stage, "manifest.json")], { stdio: "inherit" });
  execFileSync(mcpb, ["pack", stage, resolve(out)], { stdio: "inherit" });
} finally {
  rmSync(stage, { recursive: true, force: true });
}
