#!/usr/bin/env bash
# The demo behind tools/run.sh: a node on the embedded PostgreSQL, the example
# HTTP executor, and tasks flowing through them (quick work, a retry, a 202
# with its result coming later, a reschedule, recurring jobs). The node then keeps running
# until Ctrl-C so that the CLI can be tried against it.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/taskmill
api=http://127.0.0.1:8480
logs=taskmill-data/logs
run=$(date +%H%M%S)
mkdir -p "$logs"

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

step "Starting the example executor on 127.0.0.1:8490 and a node (logs in $logs/)"
"$bin" example-executor --listen 127.0.0.1:8490 --callback "$api" >"$logs/executor.log" 2>&1 &
pids+=($!)
"$bin" node --config config/demo.toml "$@" >"$logs/node.log" 2>&1 &
node_pid=$!
pids+=($node_pid)
for _ in $(seq 1 120); do
  "$bin" nodes >/dev/null 2>&1 && break
  kill -0 "$node_pid" 2>/dev/null || { echo "the node stopped:"; tail -20 "$logs/node.log"; exit 1; }
  sleep 0.5
done
show "$bin" nodes

step "20 thumbnails in batch thumbs-$run, priorities 1 to 5, run by the node itself"
for i in $(seq 1 20); do
  "$bin" submit THUMBNAIL "img-$run-$i" --priority $((1 + i % 5)) --batch "thumbs-$run" \
    --payload "{\"image\": $i}" >/dev/null
done
sleep 1
show "$bin" batch "thumbs-$run"
show "$bin" list --batch "thumbs-$run" --limit 5

step "An email whose service fails the first attempt (503): retried with backoff"
show "$bin" submit EMAIL "welcome-$run" --payload '{"to": "ada@example.com", "fail_attempts": 1}' --wait
email=$("$bin" list --type EMAIL --key "welcome-$run" --json | sed -n 's/.*"id":\([0-9]*\).*/\1/p' | head -1)
show "$bin" attempts "$email"

step "An email the service accepts (202) and reports on later, through POST /v1/tasks/{id}/result"
show "$bin" submit EMAIL "receipt-$run" --payload '{"to": "bob@example.com", "async": true}' --wait

step "A report planned for an hour from now, then moved to 3 seconds from now"
show "$bin" submit REPORT "monthly-$run" --payload '{"ms": 500}' --in 1h
show "$bin" reschedule REPORT "monthly-$run" --in 3s
sleep 5
show "$bin" list --type REPORT --key "monthly-$run"

step "Submitting the same thumbnail again changes nothing (it already ran)"
show "$bin" submit THUMBNAIL "img-$run-1"

step "A recurring job from config/demo.toml, and one put by hand: every 2 seconds"
show "$bin" jobs put "sync-$run" --schedule "@every 2s" --type THUMBNAIL --payload '{"sync": true}'
show "$bin" jobs next "sync-$run" --count 3
sleep 5
show "$bin" jobs firings "sync-$run" --limit 3
show "$bin" jobs list
"$bin" jobs delete "sync-$run" >/dev/null

step "Where things stand"
show "$bin" stats

step "The node keeps running. Try, in another terminal:"
cat <<HINT
  $bin list --limit 10
  $bin submit EMAIL hello --payload '{"to": "you@example.com", "fail_attempts": 2}' --wait
  $bin stats
  $bin jobs firings digest
  $bin --help
Node log: $logs/node.log   Executor log: $logs/executor.log
Ctrl-C stops the node and its PostgreSQL.
This node has no api.token: anything that reaches 127.0.0.1:8480 may drive it.
Set one (--set api.token=... or TASKMILL_API_TOKEN) before it listens beyond localhost.
HINT
wait "$node_pid"
