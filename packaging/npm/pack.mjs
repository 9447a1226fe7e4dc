// Packs one orchestra binary into the npm package of its platform, and the
// launcher package that finds it:
//
//   node packaging/npm/pack.mjs BINARY GOOS GOARCH VERSION OUTDIR
//
// OUTDIR receives two tarballs, as `npm pack` makes them:
//   - @orchestra-mcp/orchestra-<platform>-<arch>: the binary as
//     bin/orchestra (bin/orchestra.exe on Windows), with "os" and "cpu"
//     fields so that npm installs it only there;
//   - @orchestra-mcp/orchestra: the launcher (orchestra/bin/orchestra.js)
//     with every platform package as an optional dependency.
// Both take VERSION (less any build metadata, which npm drops), so that the
// launcher's dependencies move in lockstep with the release. GoReleaser runs
// this after each build; the launcher package is the same for each, so a
// build whose launcher tarball is already there leaves it alone, and one is
// moved into place whole, never written in place.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

// Node's names of the release's targets.
const platforms = { darwin: "darwin", linux: "linux", windows: "win32" };
const cpus = { amd64: "x64", arm64: "arm64" };

function fail(msg) {
  console.error(`pack.mjs: ${msg}`);
  process.exit(2);
}

const [binary, goos, goarch, release, outArg] = process.argv.slice(2);
if (!outArg) {
  fail("usage: node packaging/npm/pack.mjs BINARY GOOS GOARCH VERSION OUTDIR");
}
if (!platforms[goos] || !cpus[goarch]) {
  fail(`${goos}/${goarch} has no npm platform: want GOOS ${Object.keys(platforms).join(", ")} and GOARCH ${Object.keys(cpus).join(", ")}`);
}
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
const version = release.replace(/\+.*$/, "");
const launcher = JSON.parse(readFileSync(join(here, "orchestra", "package.json"), "utf8"));
const target = `${platforms[goos]}-${cpus[goarch]}`;
const name = `${launcher.name}-${target}`;
if (!(name in launcher.optionalDependencies)) {
  fail(`orchestra/package.json has no optional dependency ${name}: add it`);
}

// pack packs the package staged in dir into out and returns the tarball's
// name.
function pack(dir, into) {
  const report = execFileSync("npm", ["pack", dir, "--pack-destination", into, "--ignore-scripts", "--json", "--loglevel=error"], {
    encoding: "utf8",
  });
  return JSON.parse(report)[0].filename;
}

// stage makes a fresh directory under dir and returns it.
function stage(dir, prefix) {
  return mkdtempSync(join(dir, prefix));
}

const platformDir = stage(tmpdir(), `orchestra-npm-${target}-`);
try {
  const exe = goos === "windows" ? "orchestra.exe" : "orchestra";
  mkdirSync(join(platformDir, "bin"));
  copyFileSync(binary, join(platformDir, "bin", exe));
  chmodSync(join(platformDir, "bin", exe), 0o755);
  const pkg = {
    name,
    version,
    description: `The orchestra binary for ${target}, run by ${launcher.name}.`,
    homepage: launcher.homepage,
    repository: launcher.repository,
    os: [platforms[goos]],
    cpu: [cpus[goarch]],
    files: [`bin/${exe}`],
    // Yarn's Plug'n'Play would otherwise leave the binary inside a zip.
    preferUnplugged: true,
  };
  writeFileSync(join(platformDir, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  writeFileSync(
    join(platformDir, "README.md"),
    `# ${name}\n\nThe orchestra ${version} binary for ${target}. Install [${launcher.name}](https://www.npmjs.com/package/${launcher.name}) instead: it installs this package on ${target} and runs the binary.\n`,
  );
  console.log(`npm: ${pack(platformDir, out)}`);
} finally {
  rmSync(platformDir, { recursive: true, force: true });
}

const launcherTarball = `${launcher.name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`;
if (!existsSync(join(out, launcherTarball))) {
  // Staged and packed inside out, so that the rename is on one file system.
  const work = stage(out, ".launcher-");
  try {
    const dir = join(work, "package");
    mkdirSync(join(dir, "bin"), { recursive: true });
    launcher.version = version;
    for (const dep of Object.keys(launcher.optionalDependencies)) {
      launcher.optionalDependencies[dep] = version;
    }
    writeFileSync(join(dir, "package.json"), JSON.stringify(launcher, null, 2) + "\n");
    copyFileSync(join(here, "orchestra", "bin", "orchestra.js"), join(dir, "bin", "orchestra.js"));
    chmodSync(join(dir, "bin", "orchestra.js"), 0o755);
    copyFileSync(join(here, "orchestra", "README.md"), join(dir, "README.md"));
    const tarball = pack(dir, work);
    if (tarball !== launcherTarball) {
      fail(`npm pack made ${tarball}, want ${launcherTarball}`);
    }
    renameSync(join(work, tarball), join(out, tarball));
    console.log(`npm: ${tarball}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
