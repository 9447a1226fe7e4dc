// Drives orchestra's pausing and resuming with the TypeScript SDK 1.x
// client over stdio (pause_test.go):
//
//   node pause.mjs COMMAND_JSON MODE
//
// MODE "pause": read (a server tool) -> edit (a tool of this client) ->
// verify pauses at edit with its arguments resolved and finishes once
// resumed; a parallel group with two client tools yields both at once; a
// result of the wrong shape is refused and the run stays paused; an unknown
// exec id is refused. "expire": the run pauses and the resume comes after
// limits.pause_ttl. "ask": ask_user through elicitation, accepted then
// declined. "ask-none": a client without elicitation; ask_user fails with
// user_unavailable, and pauses for the calling model only when the plan
// says "if_no_user": "pause".
// The client validates every structuredContent against the tool's
// outputSchema. It prints one JSON line: {"ok": ..., "checks": [...], "error": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { check, call, report } from "./checks.mjs";

const [target, mode] = process.argv.slice(2);
const [command, ...args] = JSON.parse(target);

const edit = {
  name: "edit",
  description: "Edits a file in the IDE.",
  input_schema: { type: "object", properties: { path: { type: "string" }, text: { type: "string" } }, required: ["path", "text"] },
  output_schema: { type: "object", properties: { diff: { type: "string" } }, required: ["diff"] },
};
const approve = { name: "approve", output_schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } };

const readEditVerify = {
  client_tools: [edit],
  plan: {
    steps: [
      { id: "read", tool: "fx__echo", arguments: { text: "$bindings.file" } },
      { id: "edit", tool: "edit", arguments: { path: "$bindings.file", text: "fixed ${read.output.text}" } },
      { id: "verify", tool: "json_query", arguments: { query: ".diff | length > 0", input: { diff: "$edit.output.diff" } } },
    ],
  },
  bindings: { file: "main.go" },
};

async function pauseMode(client) {
  let { isError, env } = await call(client, readEditVerify);
  const a = env.artifact;
  check(!isError && a.status === "awaiting_client", "pauses at the client tool without an error", env);
  check(a.pending.length === 1 && a.pending[0].step === "edit" && a.pending[0].arguments.text === "fixed main.go" && a.pending[0].arguments.path === "main.go",
    "the pending call has its arguments resolved", a.pending);
  const id = a.resume.exec_id;

  ({ isError, env } = await call(client, { resume: { exec_id: id, results: { edit: { diff: 42 } } } }));
  check(isError && env.artifact.validation_errors[0].code === "invalid_result" && /diff/.test(env.artifact.validation_errors[0].message),
    "a result of the wrong shape is refused with the schema error", env.artifact);
  check(env.artifact.resume.exec_id === id, "the refusal says the run is still paused", env.artifact);

  ({ isError, env } = await call(client, { resume: { exec_id: id, results: { edit: { diff: "+fixed" } } } }));
  check(!isError && env.artifact.status === "success" && env.artifact.steps[2].output.result === true, "the resumed run finishes", env.artifact);
  check(env._metadata.exec_id === id, "the resumed run keeps its exec id", env._metadata);

  ({ isError, env } = await call(client, { resume: { exec_id: id, results: { edit: { diff: "+fixed" } } } }));
  check(isError && env.artifact.validation_errors[0].code === "not_resumable", "the same resume again is refused", env.artifact);

  ({ isError, env } = await call(client, {
    client_tools: [edit, approve],
    plan: {
      steps: [
        { id: "both", parallel: [
          { id: "e", tool: "edit", arguments: { path: "a", text: "b" } },
          { id: "r", tool: "fx__echo", arguments: { text: "server" } },
          { id: "ok", tool: "approve", arguments: {} },
        ] },
      ],
    },
  }));
  check(!isError && env.artifact.pending.map((p) => p.step).join(",") === "e,ok", "a parallel group yields both client calls at once", env.artifact);
  ({ isError, env } = await call(client, { resume: { exec_id: env.artifact.resume.exec_id, results: { e: { diff: "+b" }, ok: { ok: true } } } }));
  const child = (id) => env.artifact.steps[0].children.find((c) => c.id === id);
  check(!isError && env.artifact.status === "success" && child("r").output.text === "server" && child("ok").output.ok === true, "both results resume the group", env.artifact);

  ({ isError, env } = await call(client, { resume: { exec_id: "00000000-0000-0000-0000-000000000000", results: { edit: { diff: "" } } } }));
  check(isError && env.artifact.validation_errors[0].code === "unknown_run", "an unknown exec id is refused", env.artifact);
}

async function expireMode(client) {
  let { isError, env } = await call(client, readEditVerify);
  check(env.artifact.status === "awaiting_client", "pauses", env.artifact);
  ({ isError, env } = await call(client, { resume: { exec_id: env.artifact.resume.exec_id, results: { edit: { diff: "+x" } } } }));
  check(isError && env.artifact.status === "failed" && env.artifact.errors.some((e) => e.code === "pause_expired"), "a resume after pause_ttl fails with pause_expired", env.artifact);
}

const gated = (answer, extra = {}) => ({
  plan: {
    steps: [
      { id: "ask", tool: "ask_user", arguments: { message: `Delete the branch? (${answer})`, schema: { type: "object", properties: { reason: { type: "string" } } }, ...extra } },
      { id: "delete", tool: "fx__echo", arguments: { text: "deleted" } },
    ],
  },
});

async function askMode(client) {
  let { isError, env } = await call(client, gated("accept"));
  check(!isError && env.artifact.status === "success" && env.artifact.steps[0].output.action === "accept" && env.artifact.steps[0].output.content.reason === "yes",
    "accept continues", env.artifact);
  ({ isError, env } = await call(client, gated("decline")));
  check(isError && env.artifact.steps[0].error.code === "declined" && env.artifact.steps[1].status === "skipped", "decline fails the step with declined", env.artifact);
}

async function askNoneMode(client) {
  let { isError, env } = await call(client, gated("none"));
  check(isError && env.artifact.steps[0].error.code === "user_unavailable" && env.artifact.steps[1].status === "skipped",
    "without elicitation ask_user fails with user_unavailable and the gated step does not run", env.artifact);
  ({ isError, env } = await call(client, gated("none", { if_no_user: "pause" })));
  check(!isError && env.artifact.status === "awaiting_client" && env.artifact.pending[0].tool === "ask_user", "with if_no_user pause ask_user pauses", env.artifact);
  ({ isError, env } = await call(client, { resume: { exec_id: env.artifact.resume.exec_id, results: { ask: { action: "accept", content: {} } } } }));
  check(!isError && env.artifact.status === "success", "the calling model's answer resumes it", env.artifact);
}

async function main() {
  const capabilities = mode === "ask" ? { elicitation: {} } : {};
  const client = new Client({ name: "ts-pause", version: "1.0.0" }, { capabilities });
  if (mode === "ask") {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const accept = /\(accept\)/.test(req.params.message);
      return accept ? { action: "accept", content: { reason: "yes" } } : { action: "decline" };
    });
  }
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  try {
    await { pause: pauseMode, expire: expireMode, ask: askMode, "ask-none": askNoneMode }[mode](client);
  } finally {
    await client.close();
  }
}

report(main);
