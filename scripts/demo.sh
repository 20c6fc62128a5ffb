#!/usr/bin/env bash
# DEMO of the main job: `eas up --dry-run` against a RECORDED cluster (fixtures/clusters/
# k3d-gpu-desktop, served on 127.0.0.1 by the tests' API server) with SYNTHETIC EAS/EI/EAT trees
# (fixtures/synthetic). It touches no real cluster and writes nothing but a temporary directory
# (or --out DIR). Pins: the real pins.json, with the tree rows pointed at the synthetic commits.
#
#   scripts/demo.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-}
work=$(mktemp -d)
server_pid=""
cleanup() {
  exec 3>&- 2>/dev/null || true
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --quiet --bin eas --example cluster-server

for n in eas ei eat; do
  mkdir -p "$work/repos"
  cp -r "fixtures/synthetic/$n" "$work/repos/$n"
  git -C "$work/repos/$n" init -q -b main
  git -C "$work/repos/$n" add -A
  git -C "$work/repos/$n" -c user.name=demo -c user.email=demo@example.invalid commit -qm "synthetic $n"
done
python3 - "$work" <<'PY'
import json, subprocess, sys
work = sys.argv[1]
pins = json.load(open("pins.json"))
for row in pins["pins"]:
    if row["profile"] == "main":
        repo = f"{work}/repos/{row['name']}"
        row["sha"] = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"], text=True).strip()
        row["locked"] = True
        row["source"] = "DEMO: synthetic tree"
json.dump(pins, open(f"{work}/pins.json", "w"), indent=2)
PY

mkfifo "$work/hold"
target/release/examples/cluster-server fixtures/clusters/k3d-gpu-desktop \
  --kubeconfig-out "$work/kubeconfig" --quiet <"$work/hold" >"$work/server.out" 2>/dev/null &
server_pid=$!
exec 3>"$work/hold"
for _ in $(seq 1 100); do
  grep -q '^url ' "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
grep -q '^url ' "$work/server.out" || { echo "demo: the recorded cluster did not start" >&2; exit 1; }

echo "== DEMO: recorded cluster k3d-gpu-desktop at $(sed -n 's/^url //p' "$work/server.out"), synthetic trees" >&2
node=fixtures/clusters/k3d-gpu-desktop/node-files/k3d-gpu-server-0/config.toml
target/release/eas --kubeconfig "$work/kubeconfig" --state-dir "$work/state" \
  up --dry-run --pins "$work/pins.json" \
  --eas-repo "$work/repos/eas" --ei-repo "$work/repos/ei" --eat-repo "$work/repos/eat" \
  --containerd-config "k3d-gpu-server-0=$node" --nri-socket k3d-gpu-server-0=present \
  ${out:+--out "$out"}
