// Drives a background run with the TypeScript SDK 1.x client over stdio
// (background_test.go), keeping the SDK's default request timeout of 60 s:
//
//   node background.mjs COMMAND_JSON STEP_MS
//
// A plan of three fx__sleep steps of STEP_MS each (longer than the timeout
// together) is started with "background": true and answered at once with
// status running; the client subscribes to the run's record; awaits of
// 25 s each return running with progress that does not shrink, and the
// last one the final envelope; the record's updates were sent. The client
// validates every structuredContent against the tool's outputSchema. It
// prints one JSON line: {"ok": ..., "checks": [...], "error": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { check, call, report } from "./checks.mjs";

const [target, stepMS] = process.argv.slice(2);
const [command, ...args] = JSON.parse(target);

async function main() {
  const client = new Client({ name: "ts-background", version: "1.0.0" }, { capabilities: {} });
  const updates = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri));
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  try {
    await client.listTools(); // the SDK validates results against the output schemas from here on
    const ms = Number(stepMS);
    const sleep = (id) => ({ id, tool: "fx__sleep", arguments: { ms } });
    let { isError, env } = await call(client, { plan: { steps: [sleep("a"), sleep("b"), sleep("c")] }, background: true });
    const bg = env.artifact.background;
    check(!isError && env.artifact.status === "running" && bg && bg.exec_id && bg.steps === 3 && bg.steps_ended === 0,
      "the background call is answered while its first step sleeps", env.artifact);
    check(env._metadata.record === `orchestra://executions/${bg.exec_id}`, "the answer names the run's record", env._metadata);
    await client.subscribeResource({ uri: env._metadata.record });

    const progress = [];
    for (let i = 0; i < 12; i++) {
      ({ isError, env } = await call(client, { await: { exec_id: bg.exec_id, timeout_ms: 25000 } }));
      if (env.artifact.status !== "running") {
        break;
      }
      progress.push(env.artifact.background.steps_ended);
    }
    check(progress.length >= 2 && progress.every((n, i) => i === 0 || n >= progress[i - 1]) && progress[progress.length - 1] >= 1,
      "awaits return running with progress that grows", progress);
    check(!isError && env.artifact.status === "success" && env.artifact.steps.length === 3 && env._metadata.exec_id === bg.exec_id,
      "the last await returns the final envelope", env.artifact);
    check(updates.length >= 2 && updates.every((u) => u === `orchestra://executions/${bg.exec_id}`),
      "the subscribed client was told of the record's updates", updates);
  } finally {
    await client.close();
  }
}

report(main);
