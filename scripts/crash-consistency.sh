#!/usr/bin/env bash
# Crash consistency (issue 11): SIGKILL `eas up` at 30 points (11 at its own progress: phase lines
# and the stand-in installer's tasks; 19 time offsets, one drawn with a fixed seed in each 19th of a
# run measured first in the same test process), then `eas up --break-lock`, `eas down` and a
# second `eas down` against the stateful recorded cluster, with a real Docker Engine. A point
# where `eas up` had already ended fails. Prints "crash consistency: N of 30 points", how many
# were real kills, the phases hit, the containers removed and the time taken. Serialized with
# the other Docker tests on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
flock /tmp/eas-docker.lock cargo test --test it --features docker-tests -- --ignored --nocapture down_safety::crash_consistency_at_30_points --exact \
    2>&1 | tee "$log" || status=$?
echo "--- summary"
grep '^crash consistency:' "$log" || echo "crash consistency: no summary (the test ended early; see above)"
echo "crash consistency: $(($(date +%s) - start)) s in all, the build and the wait for the Docker lock included"
exit "$status"
