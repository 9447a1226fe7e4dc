// Drives an agent's handoff with the TypeScript SDK 1.x client over stdio
// (agent_handoff_test.go):
//
//   node agent_handoff.mjs COMMAND_JSON MODE DIR
//
// A plan's agent step (its model a local fake) reads DIR/a.txt with the
// filesystem server and asks for editor_apply, a tool of this client: the
// run pauses with that call, named by its step and agent. MODE "same"
// resumes on the same connection; MODE "kill" kills orchestra with SIGKILL
// first and resumes through a new process. The resumed run finishes and
// the plan's next step uses the agent's answer. Every structuredContent
// is validated against the tool's outputSchema by the client. It prints
// one JSON line: {"ok": ..., "checks": [...], "error": ...}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { check, call, report } from "./checks.mjs";

const [target, mode, dir] = process.argv.slice(2);
const [command, ...args] = JSON.parse(target);

const editorApply = {
  name: "editor_apply",
  description: "Applies an edit in the user's editor.",
  input_schema: { type: "object", properties: { path: { type: "string" }, text: { type: "string" } }, required: ["path", "text"] },
  output_schema: { type: "object", properties: { applied: { type: "boolean" } }, required: ["applied"] },
};

async function connect() {
  const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
  const client = new Client({ name: "ts-agent-handoff", version: "1.0.0" });
  await client.connect(transport);
  await client.listTools(); // the client validates structuredContent against these outputSchemas
  return { client, transport };
}

report(async () => {
  let { client, transport } = await connect();
  let { isError, env } = await call(client, {
    client_tools: [editorApply],
    plan: {
      steps: [
        { id: "edit", agent: "coder", prompt: `Uppercase ${dir}/a.txt` },
        { id: "report", tool: "render", arguments: { template: "report: {{.a}}", values: { a: "$edit.output.result.text" } } },
      ],
    },
  });
  let a = env.artifact;
  check(!isError && a.status === "awaiting_client", "the agent step pauses the run", env);
  check(a.pending.length === 1 && a.pending[0].step === "edit" && a.pending[0].agent === "agent__coder" && a.pending[0].tool === "editor_apply" &&
    a.pending[0].arguments.text === "ALPHA", "one pending call, named by its step and agent, with its arguments", a.pending);
  const id = a.resume.exec_id;
  const callId = a.pending[0].call_id;

  if (mode === "kill") {
    process.kill(transport.pid, "SIGKILL");
    await client.close().catch(() => {});
    ({ client, transport } = await connect());
    check(true, "orchestra killed with SIGKILL and started again");
  }

  ({ isError, env } = await call(client, { resume: { exec_id: id, results: { [callId]: { applied: true } } } }));
  a = env.artifact;
  check(!isError && a.status === "success", "the resumed run finishes", env);
  check(a.steps[0].output.status === "success" && /^edited; the client said/.test(a.steps[0].output.result.text), "the agent answers with the client's result", a.steps[0]);
  check(/^report: edited;/.test(a.steps[1].output.text), "the plan's next step uses the answer", a.steps[1]);
  check(env._metadata.exec_id === id, "the resumed run keeps its exec id", env._metadata);
  await client.close();
});
