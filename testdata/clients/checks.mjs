// What the scripts that drive orchestra share (pause.mjs, background.mjs,
// agent_handoff.mjs): their checks, a call of agent_orchestrate, and the one
// JSON line each prints, {"ok": ..., "checks": [...], "error": ...}.

export const checks = [];

// check records what held, and throws with the detail when it did not.
export function check(cond, what, detail) {
  if (!cond) {
    throw new Error(`${what}: ${JSON.stringify(detail).slice(0, 1500)}`);
  }
  checks.push(what);
}

// call calls agent_orchestrate with the SDK's default request timeout; the
// client validates structuredContent against the tool's outputSchema.
export async function call(client, input) {
  const res = await client.callTool({ name: "agent_orchestrate", arguments: input });
  return { isError: !!res.isError, env: res.structuredContent };
}

// report runs main and prints the script's line.
export function report(main) {
  return main().then(
    () => console.log(JSON.stringify({ ok: true, checks })),
    (err) => console.log(JSON.stringify({ ok: false, checks, error: String(err?.stack ?? err) })),
  );
}
