#!/usr/bin/env bash
# Benchmarks `eas facts` on the 2000-node recorded cluster against one
# `kubectl get nodes,namespaces,daemonsets,secrets,deployments -A -o json` on the same server:
# interleaved runs, median wall time of each, their ratio, and peak RSS (GNU time).
#
#   scripts/bench-facts.sh [RUNS] [CLUSTER]     defaults: 11 runs, scale-2000
#
# Goal (issue 3): ratio <= 1.5, eas peak RSS < 100 MB. Both tools start with a warm-up run
# (kubectl's discovery cache is then warm, as it is for a user).
set -euo pipefail

runs=${1:-11}
cluster=${2:-scale-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
fixture=$root/fixtures/clusters/$cluster
kubectl=${KUBECTL:-/usr/bin/kubectl}
gnutime=/usr/bin/time

if [ ! -x "$gnutime" ]; then
  echo "bench-facts: GNU time is missing (apt-get install time)" >&2
  exit 1
fi
cd "$root"
# shellcheck source=scripts/lib-target.sh
source "$root/scripts/lib-target.sh"
release_binaries

# shellcheck source=scripts/lib-recorded.sh
source scripts/lib-recorded.sh
serve_recorded "$server" "$fixture" "$work" --no-auth

read -r -a facts_args <"$fixture/facts-args"
export HOME=$work/home
mkdir -p "$HOME"

# Each timed run (lib-recorded.sh) appends its wall seconds and peak RSS in KiB (GNU time); the
# documents go nowhere.
timed_stdout=/dev/null

run_eas() { (cd "$fixture" && timed "$1" "$eas" --kubeconfig "$work/kubeconfig" facts "${facts_args[@]}"); }
run_kubectl() { timed "$1" "$kubectl" --kubeconfig "$work/kubeconfig" get nodes,namespaces,daemonsets,secrets,deployments -A -o json; }

run_eas "$work/warm"
run_kubectl "$work/warm"
for _ in $(seq 1 "$runs"); do
  run_eas "$work/eas"
  run_kubectl "$work/kubectl"
done

eas_med=$(cut -d' ' -f1 "$work/eas" | median)
kc_med=$(cut -d' ' -f1 "$work/kubectl" | median)
eas_rss=$(cut -d' ' -f2 "$work/eas" | sort -n | tail -n 1)
kc_rss=$(cut -d' ' -f2 "$work/kubectl" | sort -n | tail -n 1)

printf 'cluster %s, %s interleaved runs each\n' "$cluster" "$runs"
printf 'eas facts      median %.3f s   peak RSS %d KiB\n' "$eas_med" "$eas_rss"
printf 'kubectl get    median %.3f s   peak RSS %d KiB\n' "$kc_med" "$kc_rss"
printf 'ratio eas/kubectl %.2f (goal <= 1.5); eas peak RSS %.1f MB (goal < 100)\n' \
  "$(echo "$eas_med / $kc_med" | bc -l)" "$(echo "$eas_rss / 1024" | bc -l)"
