#!/usr/bin/env bash
# Benchmark: `eas config` (release build) over every fixture under fixtures/config, ROUNDS times.
# Prints the wall time per round and per invocation (process start included).
#   scripts/bench-config.sh [ROUNDS]   default 20
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
cargo build --release -q
# shellcheck source=scripts/lib-target.sh
source scripts/lib-target.sh
bin=$(target_dir)/release/eas
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cases=(fixtures/config/*/)
n=${#cases[@]}
start=$(date +%s%N)
for _ in $(seq 1 "$rounds"); do
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2046 # the args file holds whitespace-separated flags
    "$bin" config --facts "$c/facts.json" --out "$out/o" $(cat "$c/args") >/dev/null 2>&1 || true
  done
done
end=$(date +%s%N)
total_ms=$(( (end - start) / 1000000 ))
echo "eas config: $rounds rounds x $n fixtures = $((rounds * n)) runs in ${total_ms} ms"
echo "per round (all fixtures): $((total_ms / rounds)) ms; per run: $(( (end - start) / (rounds * n) / 1000 )) us"
