#!/usr/bin/env bash
# The k3d smoke, on a developer's machine or in GitHub Actions (.github/workflows/smoke.yml).
#
#   scripts/ci-smoke.sh profiles           JSON list of the pins' tree profiles (the job matrix)
#   scripts/ci-smoke.sh dry-run PROFILE    `eas up --dry-run --profile PROFILE` on the k3d cluster;
#                                          its overlay decision table goes to $GITHUB_STEP_SUMMARY
#   scripts/ci-smoke.sh pick               the first profile whose overlay decides fully (no STOP)
#   scripts/ci-smoke.sh probe              `eas facts --probe-nodes` with Docker out of reach, so
#                                          each k3d node is read by a probe pod (a busybox image
#                                          imported first): every node gets containerd facts,
#                                          and no probe pod is left
#   scripts/ci-smoke.sh full [PROFILE]     lock the bastion tools against their publishers, then
#                                          `eas up --layer inference` at PROFILE (default: pick),
#                                          verify, down, and down again (must be a no-op)
#
# Exit codes of dry-run: 0 the overlay decides fully; 4 a row STOPs: the profile NEEDS
# REGENERATING (only that profile fails); anything else: eas failed for another reason.
#
# Needs: k3d (created once per run, deleted on exit unless EAS_SMOKE_KEEP=1), jq, and eas:
#   EAS                  the eas binary [default: cargo build --release, release/eas in cargo's target directory]
#   EAS_PINS             the pins file [default: pins.json]
#   EAS_SMOKE_CLUSTER    k3d cluster name [default: eas-smoke]
#   EAS_SMOKE_K3S_IMAGE  node image [default: the pinned one below]
#   EAS_SMOKE_MODEL      the model for the full run [default: qwen3-0-6b, the smallest LLM of the
#                        catalog read at Mushtaq-BGA/enterprise-inference@1e10d1ac model_manager/models.yaml]
#   EAS_SMOKE_UP_ARGS    extra `eas up` arguments, word-split (tests: local trees, node files)
#   EAS_SMOKE_PROBE_IMAGE  the image `probe` imports into the nodes [default: k3s's local-path
#                        helper busybox, rancher/mirrored-library-busybox:1.36.1]
#   EAS_SMOKE_STOCK_K3D  1 (default): a dry run that decides fully must also write the values a
#                        stock k3d cluster needs (checked in its plan); 0: skip those checks
#   GITHUB_STEP_SUMMARY  where the Markdown summary goes [default: stdout]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
cmd=$1
shift

pins=${EAS_PINS:-$root/pins.json}
cluster=${EAS_SMOKE_CLUSTER:-eas-smoke}
image=${EAS_SMOKE_K3S_IMAGE:-rancher/k3s:v1.37.1-k3s1}
model=${EAS_SMOKE_MODEL:-qwen3-0-6b}
summary=${GITHUB_STEP_SUMMARY:-/dev/stdout}
read -r -a up_args <<<"${EAS_SMOKE_UP_ARGS:-}"

command -v jq >/dev/null || { echo "ci-smoke: jq is required" >&2; exit 2; }
[ -f "$pins" ] || { echo "ci-smoke: no pins file $pins" >&2; exit 2; }

profiles() {
  jq -c '[.pins[] | select(.name == "eas") | .profile]' "$pins"
}

if [ "$cmd" = profiles ]; then
  profiles
  exit 0
fi

work=$(mktemp -d)
created=false
cleanup() {
  if [ "$created" = true ] && [ "${EAS_SMOKE_KEEP:-}" != 1 ]; then
    k3d cluster delete "$cluster" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

eas_bin() {
  if [ -n "${EAS:-}" ]; then
    echo "$EAS"
  else
    (cd "$root" && cargo build --release --locked --quiet --bin eas)
    # shellcheck source=scripts/lib-target.sh
    source "$root/scripts/lib-target.sh"
    echo "$(cd "$root" && target_dir)/release/eas"
  fi
}

cluster_up() {
  command -v k3d >/dev/null || { echo "ci-smoke: k3d is required" >&2; exit 2; }
  if ! k3d cluster get "$cluster" >/dev/null 2>&1; then
    k3d cluster create "$cluster" --image "$image" --k3s-arg "--disable=traefik@server:0" --wait --timeout 180s
    created=true
  fi
  k3d kubeconfig get "$cluster" >"$work/kubeconfig"
  export KUBECONFIG="$work/kubeconfig"
}

# The values a stock k3d node needs (containerd bin_dirs ["/bin"], ServiceLB on, no NFD, no
# accelerator); prints the first one the plan lacks.
stock_k3d_miss() {
  local plan=$1 file pattern
  while IFS='|' read -r file pattern; do
    if ! grep -qE -- "$pattern" "$plan/$file" 2>/dev/null; then
      echo "$file lacks /$pattern/"
      return 0
    fi
  done <<'EXPECT'
eas-overrides.yaml|^istio_platform: "k3d"$
eas-overrides.yaml|^metallb_enabled: false$
eas-overrides.yaml|^nfd_enabled: true$
eas-overrides.yaml|^kubernetes_cluster_cidr: "10\.42\.0\.0/16"$
eas-overrides.yaml|^kubernetes_accelerator: "cpu"$
global_config.edit.yaml|^existing_kubernetes: "/kube/config"$
EXPECT
  return 1
}

# One profile's dry run: prints its verdict, appends its section to the summary, returns eas's
# code (1 when the plan does not fit a stock k3d cluster, or the dry run wrote state).
dry_run() {
  local profile=$1 eas=$2 out="$work/plan-$1" rc verdict miss
  set +e
  "$eas" --progress plain up --dry-run --profile "$profile" --pins "$pins" \
    --out "$out" --state-dir "$work/state" "${up_args[@]}" >"$work/stdout-$profile" 2>"$work/stderr-$profile"
  rc=$?
  set -e
  if [ "$rc" = 0 ] && [ "${EAS_SMOKE_STOCK_K3D:-1}" = 1 ] && miss=$(stock_k3d_miss "$out"); then
    rc=1
    echo "ci-smoke: profile $profile: $miss" >>"$work/stderr-$profile"
  fi
  if [ "$rc" = 0 ] && [ -d "$work/state" ] && [ -n "$(find "$work/state" -type f)" ]; then
    rc=1
    echo "ci-smoke: profile $profile: the dry run wrote to the state directory" >>"$work/stderr-$profile"
  fi
  case $rc in
    0) verdict="the overlay decides fully" ;;
    1) verdict="FAILED: $(tail -n 1 "$work/stderr-$profile")" ;;
    4) verdict="NEEDS REGENERATING: an overlay row STOPs" ;;
    *) verdict="FAILED: eas up --dry-run exited $rc" ;;
  esac
  {
    echo "### Profile \`$profile\`: $verdict"
    echo
    if [ -f "$out/plan.json" ]; then
      jq -r '.overlay[] | "\(.fact) -> \(.choice) [\(.source)]"' "$out/plan.json" | "$root/scripts/decision-table.sh" "$work/stderr-$profile"
    else
      echo '```'
      tail -n 20 "$work/stderr-$profile"
      echo '```'
    fi
    echo
  } >>"$summary"
  echo "ci-smoke: profile $profile: $verdict" >&2
  return "$rc"
}

case $cmd in
  dry-run)
    [ $# -eq 1 ] || usage
    eas=$(eas_bin)
    cluster_up
    dry_run "$1" "$eas"
    ;;
  pick)
    eas=$(eas_bin)
    cluster_up
    for p in $(profiles | jq -r '.[]'); do
      if dry_run "$p" "$eas" >/dev/null; then
        echo "$p"
        exit 0
      fi
    done
    echo "ci-smoke: no profile's overlay decides fully" >&2
    exit 4
    ;;
  probe)
    eas=$(eas_bin)
    cluster_up
    probe_image=${EAS_SMOKE_PROBE_IMAGE:-docker.io/rancher/mirrored-library-busybox:1.36.1}
    docker pull --quiet "$probe_image" >/dev/null
    k3d image import "$probe_image" --cluster "$cluster" >/dev/null
    # Docker out of reach: eas cannot read the k3d node containers, so the probe must.
    DOCKER_HOST=unix:///nonexistent/eas-smoke/docker.sock \
      "$eas" facts --probe-nodes --out "$work/facts.json"
    jq -e '[.nodes[] | .containerd != null] | all' "$work/facts.json" >/dev/null ||
      { echo "ci-smoke: --probe-nodes left a node without containerd facts" >&2; exit 1; }
    left=$(kubectl get pods -n kube-system -l io.eas.probe=true -o name)
    [ -z "$left" ] || { echo "ci-smoke: probe pods left: $left" >&2; exit 1; }
    echo "ci-smoke: probe ok: $(jq -c '[.nodes[] | {name, containerd}]' "$work/facts.json")"
    ;;
  full)
    eas=$(eas_bin)
    cluster_up
    profile=${1:-}
    if [ -z "$profile" ]; then
      for p in $(profiles | jq -r '.[]'); do
        if dry_run "$p" "$eas" >/dev/null; then profile=$p; break; fi
      done
      [ -n "$profile" ] || { echo "ci-smoke: no profile's overlay decides fully" >&2; exit 4; }
    fi
    echo "ci-smoke: full install at profile $profile with model $model" >&2
    # The bastion tools are verified against their publishers' checksums and recorded in a copy
    # of the pins; the install then uses exactly those.
    cp "$pins" "$work/pins.json"
    "$eas" bastion build --lock --pins "$work/pins.json"
    state="$work/state-full"
    "$eas" up --layer inference --profile "$profile" --model "$model" --yes \
      --pins "$work/pins.json" --state-dir "$state" "${up_args[@]}"
    "$eas" verify --state-dir "$state"
    "$eas" down --yes --layer inference --pins "$work/pins.json" --state-dir "$state"
    "$eas" down --yes --layer inference --pins "$work/pins.json" --state-dir "$state"
    echo "ci-smoke: ok"
    ;;
  *) usage ;;
esac
