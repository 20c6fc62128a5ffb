#!/usr/bin/env bash
# DEMO of the whole journey (`scripts/demo.sh --full`), issue 22: against a RECORDED cluster
# (fixtures/clusters/k3d-gpu-desktop, served on 127.0.0.1 by the tests' API server, which keeps
# what is written to it) with the SYNTHETIC trees, whose es_auto_installer.sh is the tests'
# stand-in installer, run in a bastion image built locally from bastion/Dockerfile on the tests'
# base image with stand-in artifacts (as tests/it/up_cycle.rs does). Needs a Docker Engine
# (scripts/docker-up.sh); touches no real cluster. Steps: the README's real-cluster steps (eas
# doctor, eas pins show, eas up --dry-run --out plan/; the pins are the user's pins file, as after
# `eas pins lock`, which needs GitHub and is left out), then eas up --yes (the node at 48 GiB), eas
# status, eas verify, a second eas up (up to date), the node gains memory (125 GiB: the installed
# model is kept and the plan says the pick would now differ; `--repick` picks again: the plan is
# `reconfigure` and says why; applied), eas support-bundle when this eas has it, eas down --yes.
# With --journey (`scripts/demo.sh --journey`): eas init writes ./eas.yaml, then eas up --dry-run,
# eas up --yes, status, verify, eas up again (up to date), eas down and status run with no flag.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet --bin eas --example cluster-server
# shellcheck source=scripts/lib-target.sh
source scripts/lib-target.sh
debug=$(target_dir)/debug
bash scripts/base-image.sh >&2

# shellcheck source=scripts/lib-recorded.sh
source scripts/lib-recorded.sh
synthetic_trees "$work" demo "DEMO: synthetic tree"
serve_recorded "$debug/examples/cluster-server" fixtures/clusters/k3d-gpu-desktop "$work" --egress
url=$(sed -n 's/^url //p' "$work/server.out")
# The hosts the egress check asks answer from the server's loopback stand-in (as in demo.sh):
# without it, on a machine without internet access, google.com (the installer's preflight aborts
# without it) is a blocker of the install.
egress_urls=$(sed -n 's/^egress //p' "$work/server.out")
egress_certs=$(sed -n 's/^certs //p' "$work/server.out")

# The stand-in bastion artifacts, served from file:// URLs (tests/it/support/artifacts.rs).
mkdir -p "$work/served" "$work/home"
python3 - "$work" <<'PY'
import hashlib, io, json, sys, tarfile
work = sys.argv[1]
served = f"{work}/served"
def targz(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, body, mode in files:
            i = tarfile.TarInfo(name); i.size = len(body); i.mode = mode
            t.addfile(i, io.BytesIO(body))
sha = lambda b: hashlib.sha256(b).hexdigest()
open(f"{served}/kubectl", "w").write('#!/bin/sh\necho "kubectl stand-in v1.37.2 demo"\n')
# yq as the installer files call it (`yq -o=json '.' FILE`: the YAML as JSON, for jq), with the
# bastion venv's PyYAML, as tests/it/support/artifacts.rs has it.
open(f"{served}/yq", "w").write("#!/opt/eas/venv/bin/python3\nimport json, sys, yaml\n"
    "if '--version' in sys.argv:\n    print('yq stand-in v4.54.1')\n    sys.exit(0)\n"
    "with open(sys.argv[-1]) as f:\n    print(json.dumps(yaml.safe_load(f)))\n")
targz(f"{served}/helm.tar.gz", [("linux-amd64/helm", b"#!/bin/sh\necho helm stand-in\n", 0o755)])
readme = b"stand-in kubernetes.core for the eas demo\n"
files = json.dumps({"format": 1, "files": [
    {"name": ".", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1},
    {"name": "README.md", "ftype": "file", "chksum_type": "sha256", "chksum_sha256": sha(readme), "format": 1}]}).encode()
manifest = json.dumps({"format": 1, "collection_info": {"namespace": "kubernetes", "name": "core",
    "version": "6.3.0", "authors": ["eas demo"], "readme": "README.md", "tags": [], "description": "eas demo stand-in",
    "license": ["GPL-3.0-or-later"], "license_file": None, "dependencies": {}, "repository": None,
    "documentation": None, "homepage": None, "issues": None},
    "file_manifest_file": {"name": "FILES.json", "ftype": "file", "chksum_type": "sha256",
    "chksum_sha256": sha(files), "format": 1}}).encode()
targz(f"{served}/kubernetes-core-6.3.0.tar.gz",
      [("MANIFEST.json", manifest, 0o644), ("FILES.json", files, 0o644), ("README.md", readme, 0o644)])
pins = json.load(open(f"{work}/pins.json"))
names = {"kubectl": "kubectl", "helm": "helm.tar.gz", "yq": "yq", "kubernetes.core": "kubernetes-core-6.3.0.tar.gz"}
for row in pins["pins"]:
    if row["profile"] == "bastion" and row.get("url"):
        path = f"{served}/{names[row['name']]}"
        row["url"] = f"file://{path}"
        row["sha256"] = sha(open(path, "rb").read())
json.dump(pins, open(f"{work}/pins.json", "w"), indent=2)
PY

token=$(sed -n 's/^ *token: *//p' "$work/kubeconfig" | head -1)
memory() { # the recorded node's memory, as a kubelet would report it
  curl -sf -X PATCH -H "Authorization: Bearer $token" -H 'Content-Type: application/merge-patch+json' \
    "$url/api/v1/nodes/k3d-gpu-server-0" \
    -d "{\"status\":{\"capacity\":{\"memory\":\"$1\"},\"allocatable\":{\"memory\":\"$1\"}}}" >/dev/null
}
node=$PWD/fixtures/clusters/k3d-gpu-desktop/node-files/k3d-gpu-server-0/config.toml
eas() {
  echo "\$ eas $*" >&2
  HOME="$work/home" XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/home/config" \
    HF_ENDPOINT=https://127.0.0.1:9 EAS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt NO_COLOR=1 CI=1 \
    EAS_EGRESS_URLS="$egress_urls" SSL_CERT_FILE="$egress_certs" \
    "$debug/eas" --kubeconfig "$work/kubeconfig" --state-dir "$work/state" "$@"
}
# The pins as `eas pins lock` leaves them: the user's pins file, which every command reads
# without --pins.
mkdir -p "$work/home/config/eas" && cp "$work/pins.json" "$work/home/config/eas/pins.json"
up_args=(--base-image eas-test-base:bookworm --allow-unpinned-base
  --eas-repo "$work/repos/eas" --ei-repo "$work/repos/ei" --eat-repo "$work/repos/eat"
  --containerd-config "k3d-gpu-server-0=$node" --nri-socket k3d-gpu-server-0=present)

if [ "${1:-}" = --journey ]; then
  # The journey declared once: `eas init` writes ./eas.yaml in the work directory (the
  # kubeconfig, state directory and node, input and base flags given to it), and every later
  # command runs there with no flag at all.
  plain() {
    echo "\$ eas $*" >&2
    (cd "$work" && HOME="$work/home" XDG_CACHE_HOME="$work/cache" XDG_CONFIG_HOME="$work/home/config" \
      HF_ENDPOINT=https://127.0.0.1:9 EAS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt NO_COLOR=1 CI=1 \
      EAS_EGRESS_URLS="$egress_urls" SSL_CERT_FILE="$egress_certs" "$debug/eas" "$@")
  }
  echo "== DEMO --journey: recorded cluster k3d-gpu-desktop at $url, synthetic trees, stand-in installer" >&2
  memory 50331648Ki
  plain --kubeconfig "$work/kubeconfig" --state-dir "$work/state" init "${up_args[@]}"
  echo "== ./eas.yaml" >&2
  cat "$work/eas.yaml" >&2
  plain up --dry-run | sed -n '1,/^$/p'
  plain up --yes
  plain status
  plain verify
  echo "== a second eas up, no flag: up to date" >&2
  plain up --yes
  plain down --yes
  plain status
  exit 0
fi

echo "== DEMO --full: recorded cluster k3d-gpu-desktop at $url, synthetic trees, stand-in installer" >&2
start=$(date +%s)
memory 50331648Ki
echo "== the node has 48 GiB; the README's real-cluster steps" >&2
eas doctor --offline "${up_args[@]}"
eas pins show
(cd "$work" && eas up --dry-run --out plan/ "${up_args[@]}" | sed -n '1,/^$/p')
eas up --yes "${up_args[@]}"
eas status
eas verify
echo "== a second eas up: nothing changed" >&2
eas up --yes "${up_args[@]}"
echo "== the node gains memory (125 GiB): the installed model is kept" >&2
memory 131530088Ki
eas up --dry-run "${up_args[@]}" | sed -n '/^  layer /,/^  [a-z]/p' | sed '$d'
echo "== --repick: the pick is made again" >&2
eas up --dry-run --repick "${up_args[@]}" | sed -n '/^since the last up/,/^$/p'
eas up --yes --repick "${up_args[@]}"
if eas support-bundle --help >/dev/null 2>&1; then
  eas support-bundle --out "$work/bundle.tar.gz"
  # sed reads the whole list (head would end tar with SIGPIPE, which pipefail makes the script's end).
  tar -tzf "$work/bundle.tar.gz" | sed -n '1,20p'
else
  echo "== eas support-bundle: not in this eas (issue 22 item 4 is built on its own branch)" >&2
fi
eas down --yes --base-image eas-test-base:bookworm --allow-unpinned-base
eas status
echo "== DEMO --full took $(( $(date +%s) - start )) s (after the build)" >&2
