// Drives orchestra with one of the TypeScript MCP SDK's clients, for the
// compatibility matrix (clients_test.go):
//
//   node client.mjs SDK TRANSPORT TARGET VERSION [MODE]
//
// SDK is v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client);
// TRANSPORT is stdio (TARGET: a JSON array, the command and its arguments) or
// http (TARGET: the /mcp URL); VERSION is the protocol version to offer
// (v1 offers only its latest, 2025-11-25). MODE "plan" (the default) lists
// the tools and runs a plan; "cancel" starts a plan whose step waits, cancels
// the request once the step has started (the client's AbortSignal, which
// sends notifications/cancelled) and waits for the server to stop it;
// "oversized" sends a plan over server.max_request_bytes, which must be
// answered with an error naming the limit, then a plan that must run.
// "agent:NAME" lists the tools and calls the exposed agent tool NAME
// directly with the ExecutionRequest shape; the SDK validates its
// structuredContent against its outputSchema (and throws if it does not
// match). "request:FILE" lists the tools and runs the request (plan and
// bindings) in FILE, such as examples/quickstart.json, returning its
// structuredContent. "workflow:FILE" runs the prompt in FILE ({prompt,
// name, args, bad}) with save_as, waits for notifications/tools/list_changed
// to bring workflow__NAME (the SDK's listChanged handler refetches the
// list), calls it with args (the SDK validates its structuredContent
// against its outputSchema) and then with bad, which must be refused.
// It prints one JSON line: {"ok": ..., "version": ..., "tools": ..., "error": ...}.
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport as HTTPV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as HTTPV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { readFileSync } from "node:fs";

const [sdk, transportName, target, version, mode = "plan"] = process.argv.slice(2);
const modern = version >= "2026-07-28";
const info = { name: `ts-${sdk}`, version: "1.0.0" };

function transport() {
  if (transportName === "stdio") {
    const [command, ...args] = JSON.parse(target);
    const Stdio = sdk === "v1" ? StdioV1 : StdioV2;
    return new Stdio({ command, args, stderr: "ignore" });
  }
  const HTTP = sdk === "v1" ? HTTPV1 : HTTPV2;
  return new HTTP(new URL(target));
}

// listChanged, when set, receives the tools after each
// notifications/tools/list_changed.
let listChanged;

async function connect() {
  const t = transport();
  const onChanged = { tools: { onChanged: (err, tools) => listChanged?.(err, tools) } };
  let negotiated;
  if (sdk === "v1") {
    // 1.x offers its latest version and tells the transport what was agreed.
    const set = t.setProtocolVersion?.bind(t);
    t.setProtocolVersion = (v) => {
      negotiated = v;
      set?.(v);
    };
    const client = new ClientV1(info, { capabilities: {}, listChanged: onChanged });
    await client.connect(t);
    return { client, version: () => negotiated };
  }
  const options = { capabilities: {}, listChanged: onChanged };
  if (modern) {
    options.versionNegotiation = { mode: { pin: version } };
  } else {
    options.supportedProtocolVersions = [version];
  }
  const client = new ClientV2(info, options);
  await client.connect(t);
  return { client, version: () => client.getNegotiatedProtocolVersion() };
}

const waitPlan = { plan: { steps: [{ id: "w", tool: "fx__sleep", arguments: { ms: 60000 } }] } };
const plan = {
  plan: { steps: [{ id: "a", tool: "render", arguments: { template: "hello {{.who}}", values: { who: "$bindings.who" } } }] },
  bindings: { who: "matrix" },
};

async function main() {
  const { client, version: negotiated } = await connect();
  try {
    if (mode === "oversized") {
      // A plan larger than server.max_request_bytes (4 MiB): the answer
      // must be an error naming the limit, and the server must go on.
      const big = { plan: { steps: [{ tool: "render", arguments: { template: "x" } }] }, bindings: { blob: "a".repeat(4.5 * 1024 * 1024) } };
      const start = Date.now();
      let error = "";
      try {
        await client.callTool({ name: "agent_orchestrate", arguments: big }, ...(sdk === "v1" ? [undefined, { timeout: 30000 }] : [{ timeout: 30000 }]));
      } catch (err) {
        error = String(err?.message ?? err);
      }
      const ms = Date.now() - start;
      const after = await client.callTool({ name: "agent_orchestrate", arguments: plan });
      const ok = error.includes("server.max_request_bytes") && after.structuredContent?.artifact?.status === "success";
      return { ok, version: negotiated(), ms, error: ok ? undefined : `error ${JSON.stringify(error)}, then ${after.structuredContent?.artifact?.status}` };
    }
    if (mode === "cancel") {
      const abort = new AbortController();
      let started = false;
      const options = {
        signal: abort.signal,
        timeout: 120000,
        onprogress: (p) => {
          if (!started && /started/.test(p.message ?? "")) {
            started = true;
            abort.abort("cancelled by the matrix test");
          }
        },
      };
      // 1.x takes a result schema before the options.
      const params = { name: "agent_orchestrate", arguments: waitPlan };
      const call = (sdk === "v1" ? client.callTool(params, undefined, options) : client.callTool(params, options))
        .then(
          () => "answered",
          (err) => (abort.signal.aborted ? "aborted" : `failed: ${err?.message ?? err}`),
        );
      const outcome = await call;
      return { ok: outcome === "aborted", version: negotiated(), outcome };
    }
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    if (mode.startsWith("agent:")) {
      const name = mode.slice("agent:".length);
      const tool = tools.find((t) => t.name === name);
      if (!tool?.outputSchema) {
        return { ok: false, version: negotiated(), error: `tools/list has no ${name} with an outputSchema: ${names.join(", ")}` };
      }
      const res = await client.callTool({ name, arguments: { user_query: "count the fruits", request_id: "req-ts-1" } });
      const sc = res.structuredContent;
      const ok = !res.isError && sc?.status === "success" && sc?.request_id === "req-ts-1" && sc?.result?.data?.count === 3;
      return { ok, version: negotiated(), structured: sc, error: ok ? undefined : `isError ${res.isError}, ${JSON.stringify(sc)}` };
    }
    if (mode.startsWith("workflow:")) {
      return await workflow(client, JSON.parse(readFileSync(mode.slice("workflow:".length), "utf8")), names, negotiated);
    }
    if (!names.includes("agent_orchestrate")) {
      return { ok: false, version: negotiated(), error: `tools/list has no agent_orchestrate: ${names.join(", ")}` };
    }
    if (mode.startsWith("request:")) {
      const request = JSON.parse(readFileSync(mode.slice("request:".length), "utf8"));
      const res = await client.callTool({ name: "agent_orchestrate", arguments: request });
      const status = res.structuredContent?.artifact?.status;
      const ok = !res.isError && status === "success";
      return { ok, version: negotiated(), structured: res.structuredContent, error: ok ? undefined : `isError ${res.isError}, status ${status}` };
    }
    const res = await client.callTool({ name: "agent_orchestrate", arguments: plan });
    const status = res.structuredContent?.artifact?.status;
    const text = res.structuredContent?.artifact?.steps?.[0]?.output?.text;
    // The JSON of the structured content comes as a second text block for
    // clients older than structured content (2025-06-18), or with
    // "response": "full"; the default compact response has one block.
    const block = res.content?.[1]?.text;
    const legacy = String(negotiated()) < "2025-06-18";
    const jsonOK = block === undefined ? !legacy : JSON.parse(block)?.artifact_id === res.structuredContent?.artifact_id;
    const ok = !res.isError && status === "success" && text === "hello matrix" && jsonOK;
    return { ok, version: negotiated(), tools: names.length, error: ok ? undefined : `status ${status}, output ${text}, JSON block ${block === undefined ? "absent" : "present"}` };
  } finally {
    await client.close();
  }
}

async function workflow(client, spec, names, negotiated) {
  const name = `workflow__${spec.name}`;
  const fail = (error) => ({ ok: false, version: negotiated(), error });
  if (names.includes(name)) {
    return fail(`${name} is listed before it was saved`);
  }
  const listed = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no tools/list_changed brought ${name}`)), 30000);
    listChanged = (err, tools) => {
      const tool = tools?.find((t) => t.name === name);
      if (tool) {
        clearTimeout(timer);
        resolve(tool);
      }
    };
  });
  const saved = await client.callTool({ name: "agent_orchestrate", arguments: { prompt: spec.prompt, save_as: { name: spec.name } } });
  const meta = saved.structuredContent?._metadata?.workflow;
  if (saved.isError || meta?.tool !== name) {
    return fail(`save: isError ${saved.isError}, ${JSON.stringify(saved.structuredContent)}`);
  }
  const tool = await listed;
  const res = await client.callTool({ name, arguments: spec.args });
  let bad;
  try {
    const r = await client.callTool({ name, arguments: spec.bad });
    bad = r.isError ? r.content?.[0]?.text : `accepted: ${JSON.stringify(r.structuredContent)}`;
  } catch (err) {
    bad = `thrown: ${err?.message ?? err}`;
  }
  return { ok: !res.isError, version: negotiated(), structured: res.structuredContent, inputSchema: tool.inputSchema, outputSchema: tool.outputSchema, bad, error: res.isError ? res.content?.[0]?.text : undefined };
}

main().then(
  (r) => {
    console.log(JSON.stringify(r));
    process.exit(0);
  },
  (err) => {
    console.log(JSON.stringify({ ok: false, error: String(err?.stack ?? err) }));
    process.exit(0);
  },
);
