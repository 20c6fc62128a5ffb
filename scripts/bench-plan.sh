#!/usr/bin/env bash
# Benchmarks `eas up --dry-run` on the 2000-node recorded cluster against `eas facts` alone on
# the same server: interleaved runs, the median wall time of each and their difference. The dry
# run uses the synthetic EAS/EI/EAT trees (as scripts/demo.sh) and no Docker Engine (DOCKER_HOST
# points nowhere, so the bastion image is reported unknown, as on a machine without Docker).
#
#   scripts/bench-plan.sh [RUNS] [CLUSTER]     defaults: 11 runs, scale-2000
#
# Goal (issue 14): dry run <= facts + 0.2 s.
set -euo pipefail

runs=${1:-11}
cluster=${2:-scale-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
fixture=$root/fixtures/clusters/$cluster
cd "$root"
# shellcheck source=scripts/lib-target.sh
source "$root/scripts/lib-target.sh"
release_binaries

# shellcheck source=scripts/lib-recorded.sh
source scripts/lib-recorded.sh
synthetic_trees "$work" bench
serve_recorded "$server" "$fixture" "$work" --no-auth

read -r -a facts_args <"$fixture/facts-args"
# Hugging Face is a closed loopback port: the reads are refused at once, on every machine.
export HOME=$work/home DOCKER_HOST=unix:///nonexistent/eas-bench/docker.sock CI=1 NO_COLOR=1 HF_ENDPOINT=https://127.0.0.1:9 EAS_EGRESS_URLS=registry=https://127.0.0.1:9/v2/
mkdir -p "$HOME"

run_facts() { (cd "$fixture" && timed "$1" "$eas" --kubeconfig "$work/kubeconfig" facts "${facts_args[@]}"); }
run_plan() {
  (cd "$fixture" && timed "$1" "$eas" --kubeconfig "$work/kubeconfig" --state-dir "$work/state" \
    up --dry-run --pins "$work/pins.json" \
    --eas-repo "$work/repos/eas" --ei-repo "$work/repos/ei" --eat-repo "$work/repos/eat" "${facts_args[@]}")
}

run_facts "$work/warm"
run_plan "$work/warm"
lines=$(wc -l <"$work/stdout")
for _ in $(seq 1 "$runs"); do
  run_facts "$work/facts"
  run_plan "$work/plan"
done

facts_med=$(median <"$work/facts")
plan_med=$(median <"$work/plan")

printf 'cluster %s, %s interleaved runs each\n' "$cluster" "$runs"
printf 'eas facts           median %.3f s\n' "$facts_med"
printf 'eas up --dry-run    median %.3f s   (%d lines of plan)\n' "$plan_med" "$lines"
printf 'dry run - facts     %.3f s (goal <= 0.200)\n' "$(echo "$plan_med - $facts_med" | bc -l)"
