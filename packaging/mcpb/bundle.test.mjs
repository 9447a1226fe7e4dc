// Starts the server of a packed MCP Bundle the way a client does and lists
// its tools with the TypeScript SDK:
//
//   BUNDLE=dist/orchestra_..._linux_amd64.mcpb node --test packaging/mcpb/bundle.test.mjs
//
// The bundle is unpacked with `mcpb unpack`, and the command, arguments and
// environment come from the manifest through getMcpConfigForManifest, the
// function MCPB hosts use, with the user configuration a user would give.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = dirname(fileURLToPath(import.meta.url));
const bundle = process.env.BUNDLE;
if (!bundle) {
  throw new Error("set BUNDLE to the .mcpb file to test");
}

let dir, manifest;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "orchestra-bundle-"));
  execFileSync(join(here, "node_modules", ".bin", "mcpb"), ["unpack", resolve(bundle), join(dir, "bundle")], { stdio: "ignore" });
  manifest = JSON.parse(readFileSync(join(dir, "bundle", "manifest.json"), "utf8"));
});

after(() => rmSync(dir, { recursive: true, force: true }));

// start runs the bundle's server with userConfig and connects a client.
async function start(userConfig) {
  const cfg = await getMcpConfigForManifest({
    manifest,
    extensionPath: join(dir, "bundle"),
    systemDirs: { HOME: dir, DESKTOP: dir, DOCUMENTS: dir, DOWNLOADS: dir },
    userConfig,
    pathSeparator: "/",
  });
  assert.ok(cfg, "the manifest gives no MCP configuration");
  const transport = new StdioClientTransport({
    command: cfg.command,
    args: cfg.args,
    // The execution records go under the test's directory, not $HOME.
    env: { ...getDefaultEnvironment(), XDG_STATE_HOME: join(dir, "state"), ...cfg.env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr.on("data", (b) => (stderr += b));
  const client = new Client({ name: "bundle-test", version: "1.0.0" });
  try {
    await client.connect(transport);
  } catch (err) {
    err.message += `\nserver stderr:\n${stderr}`;
    throw err;
  }
  return { client, stderr: () => stderr };
}

async function toolNames(client) {
  const { tools } = await client.listTools();
  return tools.map((t) => t.name).sort();
}

test("the bundle lists the manifest's tools and reports the manifest's version", async () => {
  const { client } = await start({});
  try {
    assert.deepEqual(await toolNames(client), manifest.tools.map((t) => t.name).sort());
    assert.equal(client.getServerVersion().version, manifest.version);
  } finally {
    await client.close();
  }
});

test("the configuration file of user_config reaches the server", async () => {
  const config = join(dir, "orchestra.yaml");
  writeFileSync(config, "builtins:\n  http_request:\n    allowed_hosts: [example.com]\n");
  const { client } = await start({ config_file: config });
  try {
    assert.ok((await toolNames(client)).includes("http_request"), "http_request, which the configuration file turns on, is not listed");
  } finally {
    await client.close();
  }
});

test("the planner API key of user_config reaches the planner", async () => {
  const config = join(dir, "planner.yaml");
  writeFileSync(config, "planner:\n  provider: openai\n  model: gpt-4o-mini\n");
  // Without the key the configured planner cannot start, and says why.
  await assert.rejects(start({ config_file: config }), /OPENAI_API_KEY/);
  const { client } = await start({ config_file: config, planner_api_key: "sk-bundle-test" });
  try {
    assert.ok((await toolNames(client)).includes("agent_orchestrate"));
  } finally {
    await client.close();
  }
});
