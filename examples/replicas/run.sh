#!/bin/sh
# Runs Redis (AOF on, appendfsync always) and three replicas of one agent on
# this machine, until Ctrl-C. Run it from the repository's root:
#
#   examples/replicas/run.sh
#
# Replica A: http://127.0.0.1:8081, B: :8082, C: :8083. Any HTTP load
# balancer in front of them works (no sticky sessions: a stream, a cancel or
# a GetTask may land on any replica); a client may also call each replica
# directly, as below.
set -eu
cd "$(dirname "$0")"
mkdir -p data/redis data/a data/b data/c
go build -o data/handoff ../../cmd/handoff
[ -f data/signing.jwk ] || data/handoff keys gen --out data/signing.jwk

redis-server --port 6390 --bind 127.0.0.1 --dir data/redis \
  --appendonly yes --appendfsync always --save '' &
pids=$!
trap 'kill $pids 2>/dev/null; wait' INT TERM EXIT
until redis-cli -p 6390 ping >/dev/null 2>&1; do sleep 0.1; done

for r in a:8081 b:8082 c:8083; do
  data/handoff serve --config agent.yaml --listen "127.0.0.1:${r#*:}" --data-dir "data/${r%%:*}" &
  pids="$pids $!"
done
echo "replicas on :8081 :8082 :8083; in another shell, from examples/replicas:"
echo "  data/handoff send http://127.0.0.1:8081 hello        # runs on A"
echo "  data/handoff get http://127.0.0.1:8083 TASK_ID      # read on C"
echo "  data/handoff tasks http://127.0.0.1:8082            # listed on B"
wait
