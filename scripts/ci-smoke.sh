#!/usr/bin/env bash
# The k3d smoke, on a developer's machine or in GitHub Actions (.github/workflows/smoke.yml):
# creates a k3d cluster at a pinned k3s version, builds eas, runs `eas doctor` and
# `eas up --dry-run`, and checks the plan's decisions. With --full it also runs
# `eas up --layer inference` and `eas down`, then `eas down` again (must be a no-op).
#
#   scripts/ci-smoke.sh [--full] [--keep]
# Needs: docker, k3d, cargo. Environment: EAS_SMOKE_CLUSTER (default eas-smoke),
# EAS_SMOKE_K3S_IMAGE (default the pinned image below).
set -euo pipefail
cd "$(dirname "$0")/.."

full=false
keep=false
for a in "$@"; do
  case "$a" in
    --full) full=true ;;
    --keep) keep=true ;;
    *) echo "usage: $0 [--full] [--keep]" >&2; exit 2 ;;
  esac
done

cluster=${EAS_SMOKE_CLUSTER:-eas-smoke}
image=${EAS_SMOKE_K3S_IMAGE:-rancher/k3s:v1.34.1-k3s1}
work=$(mktemp -d)
cleanup() {
  if [ "$keep" = false ]; then
    k3d cluster delete "$cluster" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

for tool in docker k3d cargo; do
  command -v "$tool" >/dev/null || { echo "ci-smoke: $tool is required" >&2; exit 2; }
done

if ! k3d cluster list "$cluster" >/dev/null 2>&1; then
  k3d cluster create "$cluster" --image "$image" --k3s-arg "--disable=traefik@server:0" --wait --timeout 180s
fi
kubeconfig="$work/kubeconfig"
k3d kubeconfig get "$cluster" >"$kubeconfig"

cargo build --release --locked
eas=target/release/eas
export KUBECONFIG="$kubeconfig"

"$eas" doctor
"$eas" up --dry-run --out "$work/plan" --state-dir "$work/state"

expect() {
  local file=$1 pattern=$2
  if ! grep -qE -- "$pattern" "$work/plan/$file"; then
    echo "ci-smoke: $file lacks /$pattern/:" >&2
    cat "$work/plan/$file" >&2
    exit 1
  fi
}
# A stock k3d node reports containerd bin_dirs ["/bin"]; ServiceLB stays on; no NFD.
expect eas-overrides.yaml '^istio_platform: "k3d"$'
expect eas-overrides.yaml '^metallb_enabled: false$'
expect eas-overrides.yaml '^nfd_enabled: true$'
expect eas-overrides.yaml '^kubernetes_cluster_cidr: "10\.42\.0\.0/16"$'
expect eas-overrides.yaml '^kubernetes_accelerator: "cpu"$'
expect global_config.edit.yaml '^existing_kubernetes: "/kube/config"$'
test -s "$work/plan/plan.json"
# The dry run wrote nothing to the state directory.
if [ -d "$work/state" ] && [ -n "$(find "$work/state" -type f)" ]; then
  echo "ci-smoke: the dry run wrote to the state directory" >&2
  exit 1
fi

if [ "$full" = true ]; then
  "$eas" up --layer inference --yes --state-dir "$work/state"
  "$eas" verify --state-dir "$work/state"
  "$eas" down --yes --state-dir "$work/state"
  "$eas" down --yes --state-dir "$work/state"
fi
echo "ci-smoke: ok"
