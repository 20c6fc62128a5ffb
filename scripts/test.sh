#!/usr/bin/env bash
# The test command (README): starts what the tests need on a fresh machine (a Docker Engine,
# the locally built base image and tmux; no registry is reachable), then runs every cargo test and
# closes with one summary line over all test binaries. The Docker tier of tests/it is on
# (`--features docker-tests`): without an engine its tests fail, they are not skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/docker-up.sh
bash scripts/test-tools.sh
bash scripts/base-image.sh
# tests/it/progress_pty.rs draws on a tmux pseudo-terminal; tests/it/completions.rs sources bash's script;
# tests/it/docker_context.rs puts a logging socat proxy in front of the engine; tests/it/base_digest.rs
# runs Debian's registry on loopback; tests/it/ci_smoke.rs reads pins with jq.
for pkg in tmux:tmux socat:socat docker-registry:docker-registry jq:jq; do
  if ! command -v "${pkg%%:*}" >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${pkg#*:}" >/dev/null
  fi
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --all-targets --features docker-tests "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result: / { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
