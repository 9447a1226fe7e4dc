#!/usr/bin/env node
// orchestra's launcher. The package @orchestra-mcp/orchestra carries no
// binary: each platform's binary is a package of its own, named
// @orchestra-mcp/orchestra-<platform>-<arch> and limited to that platform by
// its "os" and "cpu" fields, and npm installs the one optional dependency
// that matches the machine. This finds it and runs it with the same
// arguments and standard streams, forwards SIGINT, SIGTERM and SIGHUP to
// it, waits for it to end, and ends the way it ended: with its exit code,
// or by the signal that killed it.
"use strict";

const { spawn } = require("node:child_process");
const { constants } = require("node:os");
const { name, version, optionalDependencies } = require("../package.json");

const target = `${process.platform}-${process.arch}`;
const pkg = `${name}-${target}`;
const exe = process.platform === "win32" ? "orchestra.exe" : "orchestra";

let binary;
try {
  binary = require.resolve(`${pkg}/bin/${exe}`);
} catch {
  if (pkg in optionalDependencies) {
    console.error(
      `orchestra: ${pkg}, the binary for ${target}, is not installed (optional dependencies were left out, ` +
        `or the lockfile was made on another platform): install it with npm install ${pkg}@${version}`,
    );
  } else {
    console.error(
      `orchestra: there is no binary for ${target} in this package: use a release archive, ` +
        `or build it with go install github.com/orchestra-mcp/orchestra@v${version}`,
    );
  }
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", windowsHide: true });

// The forwarded signals. A listener also keeps Node from exiting on the
// signal itself: the launcher ends only when orchestra has ended (it
// drains its running plans on SIGINT and SIGTERM).
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  child.kill(signal);
};
for (const signal of forwarded) {
  process.on(signal, forward);
}

child.on("error", (err) => {
  console.error(`orchestra: starting ${binary}: ${err.message}`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  if (signal === null) {
    process.exit(code);
  }
  // Die of the same signal, so that whoever started the launcher sees
  // what happened to orchestra: with the listeners gone the signal takes
  // its default action. The timer keeps Node alive until it arrives, and
  // exits with the shell's 128 + N should Node ignore the signal (it
  // ignores SIGPIPE).
  for (const s of forwarded) {
    process.off(s, forward);
  }
  setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 0)), 5000);
  process.kill(process.pid, signal);
});
