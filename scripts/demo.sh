#!/usr/bin/env bash
# DEMO of the main job: `eas up --dry-run` against a RECORDED cluster (fixtures/clusters/
# k3d-gpu-desktop, served on 127.0.0.1 by the tests' API server) with SYNTHETIC EAS/EI/EAT trees
# (fixtures/synthetic). It touches no real cluster and writes nothing but a temporary directory
# (or --out DIR). Pins: the real pins.json, with the tree rows pointed at the synthetic commits.
#
#   scripts/demo.sh [OUT_DIR]
#   scripts/demo.sh --full    the whole journey, for real against the recorded cluster (below)
#   scripts/demo.sh --journey the same journey declared once by `eas init`, no flag repeated
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --full ] || [ "${1:-}" = --journey ]; then
  exec bash scripts/demo-full.sh "$1"
fi
out=${1:-}
cargo build --release --quiet --bin eas --example cluster-server
# shellcheck source=scripts/lib-target.sh
source scripts/lib-target.sh
release=$(target_dir)/release

# shellcheck source=scripts/lib-recorded.sh
source scripts/lib-recorded.sh
synthetic_trees "$work" demo "DEMO: synthetic tree"
serve_recorded "$release/examples/cluster-server" fixtures/clusters/k3d-gpu-desktop "$work" --egress
# The hosts the egress check asks (the installer's preflight aborts without google.com) answer
# from a loopback stand-in the server starts, its throwaway CA trusted through SSL_CERT_FILE:
# the demo stays the same on a machine without internet access.
EAS_EGRESS_URLS=$(sed -n 's/^egress //p' "$work/server.out")
SSL_CERT_FILE=$(sed -n 's/^certs //p' "$work/server.out")
export EAS_EGRESS_URLS SSL_CERT_FILE

echo "== DEMO: recorded cluster k3d-gpu-desktop at $(sed -n 's/^url //p' "$work/server.out"), synthetic trees" >&2
node=fixtures/clusters/k3d-gpu-desktop/node-files/k3d-gpu-server-0/config.toml
"$release/eas" --kubeconfig "$work/kubeconfig" --state-dir "$work/state" \
  up --dry-run --pins "$work/pins.json" \
  --eas-repo "$work/repos/eas" --ei-repo "$work/repos/ei" --eat-repo "$work/repos/eat" \
  --containerd-config "k3d-gpu-server-0=$node" --nri-socket k3d-gpu-server-0=present \
  ${out:+--out "$out"}
