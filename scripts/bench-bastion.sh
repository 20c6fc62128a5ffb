#!/usr/bin/env bash
# Benchmarks the reuse path of `eas bastion build`: the image for the context exists, so eas
# hashes the context's small files, asks Docker for the tag, and stops (goal: < 300 ms wall).
#
# Uses stand-in artifacts and the local base image as the tests do (no registry needed), builds
# the image once if absent, then times repeated runs with hyperfine (Debian package), or a
# plain loop when hyperfine is missing.
#
#   scripts/bench-bastion.sh [RUNS]     default 30
#   scripts/bench-bastion.sh interrupt [RUNS]   default 5: instead, the interrupt latency of a
#       build (issue 10, finding 12): `--rebuild` runs until pip is 2 s into its large step, then
#       SIGINT; reports signal -> exit (median, min, max; goal 1 s), the managed untagged images
#       left behind and the build containers still there a minute later (goal 0 and 0).
#       Docker unmounts the killed step's overlay before eas can remove the build's images, and
#       that unmount syncs the whole filesystem under /var/lib/docker: other processes' unwritten
#       data (a cargo build) lengthens it. EAS_BENCH_SYNC=1 syncs just before each signal, to
#       measure without them.
#   EAS_BIN=path/to/eas                 default: release/eas in cargo's target directory, else debug/eas
#   EAS_CA_BUNDLE=FILE                  default: /etc/ssl/certs/ca-certificates.crt if present
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
mode=reuse
if [ "${1:-}" = interrupt ]; then mode=interrupt; shift; fi
runs=${1:-30}
[ "$mode" = interrupt ] && runs=${1:-5}
bin=${EAS_BIN:-}
if [ -z "$bin" ]; then
  # shellcheck source=scripts/lib-target.sh
  source "$here/scripts/lib-target.sh"
  target=$(cd "$here" && target_dir)
  bin=$target/release/eas
  [ -x "$bin" ] || bin=$target/debug/eas
fi
[ -x "$bin" ] || { echo "bench-bastion: no eas binary; run cargo build --release" >&2; exit 1; }
bin=$(realpath "$bin") # the script changes directory below
export EAS_CA_BUNDLE=${EAS_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$EAS_CA_BUNDLE" ] || unset EAS_CA_BUNDLE

bash "$here/scripts/docker-up.sh"
bash "$here/scripts/base-image.sh" >/dev/null

work=${EAS_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas/bench-bastion}
mkdir -p "$work/served/linux-amd64"
export XDG_CACHE_HOME=$work/cache
cd "$work/served"
printf '#!/bin/sh\necho "kubectl stand-in (bench)"\n' >kubectl
printf '#!/bin/sh\necho "yq stand-in (bench)"\n' >yq
printf '#!/bin/sh\necho "helm stand-in (bench)"\n' >linux-amd64/helm
chmod +x kubectl yq linux-amd64/helm
# Byte-stable archives, so a second run finds the same context and reuses its image.
tar --mtime=@0 --owner=0 --group=0 -cf - linux-amd64 | gzip -n >helm.tar.gz
python3 - "$here/pins.json" "$work" <<'EOF'
import gzip, hashlib, io, json, sys, tarfile
pins_path, work = sys.argv[1], sys.argv[2]
served = work + "/served/"
readme = b"stand-in kubernetes.core (bench)\n"
files = json.dumps({"format": 1, "files": [
    {"name": ".", "ftype": "dir", "chksum_type": None, "chksum_sha256": None, "format": 1},
    {"name": "README.md", "ftype": "file", "chksum_type": "sha256",
     "chksum_sha256": hashlib.sha256(readme).hexdigest(), "format": 1}]}).encode()
manifest = json.dumps({"format": 1, "collection_info": {
    "namespace": "kubernetes", "name": "core", "version": "6.3.0", "authors": ["eas bench"],
    "readme": "README.md", "tags": [], "description": "stand-in", "license": ["GPL-3.0-or-later"],
    "license_file": None, "dependencies": {}, "repository": None, "documentation": None,
    "homepage": None, "issues": None},
    "file_manifest_file": {"name": "FILES.json", "ftype": "file", "chksum_type": "sha256",
                           "chksum_sha256": hashlib.sha256(files).hexdigest(), "format": 1}}).encode()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    for name, data in [("MANIFEST.json", manifest), ("FILES.json", files), ("README.md", readme)]:
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
open(served + "kubernetes-core.tar.gz", "wb").write(gzip.compress(buf.getvalue(), mtime=0))
files_of = {"kubectl": "kubectl", "helm": "helm.tar.gz", "yq": "yq", "kubernetes.core": "kubernetes-core.tar.gz"}
pins = json.load(open(pins_path))
for r in pins["pins"]:
    if r["profile"] == "bastion" and r.get("url"):
        path = served + files_of[r["name"]]
        r["url"] = "file://" + path
        r["sha256"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
json.dump(pins, open(work + "/pins.json", "w"), indent=2)
EOF

cmd="$bin --progress plain -q bastion build --pins $work/pins.json --base-image eas-test-base:bookworm --allow-unpinned-base"
echo "bench-bastion: making sure the image exists (a first build takes minutes)" >&2
tag=$($cmd)
if [ "$mode" = interrupt ]; then
  python3 - "$runs" "$bin" "$work/pins.json" <<'EOF'
import os, signal, statistics, subprocess, sys, time
runs, eas, pins = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def dangling():
    out = subprocess.run(["docker", "images", "-aq", "--filter", "label=io.eas.managed=true",
                          "--filter", "dangling=true"], capture_output=True, text=True).stdout
    return set(out.split())
def containers():
    out = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.eas.managed=true"],
                         capture_output=True, text=True).stdout
    return set(out.split())
before = dangling()
containers_before = containers()
lat = []
for i in range(runs):
    p = subprocess.Popen([eas, "--progress", "plain", "bastion", "build", "--rebuild", "--pins", pins,
                          "--base-image", "eas-test-base:bookworm", "--allow-unpinned-base"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "| Collecting" in line:
            break
    time.sleep(2)
    if os.environ.get("EAS_BENCH_SYNC") == "1":
        os.sync()
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.stderr.read()
    rc = p.wait()
    lat.append(time.monotonic() - t0)
    print(f"run {i+1}: exit {rc} after {lat[-1]*1000:.0f} ms", file=sys.stderr)
    if rc != 130:
        sys.exit(f"bench-bastion: run {i+1} exited {rc}, not 130")
left = dangling() - before
# Docker may still be deleting the last step container's layer when eas exits: give it a minute.
for _ in range(60):
    kept = containers() - containers_before
    if not kept:
        break
    time.sleep(1)
print(f"bench-bastion interrupt: {runs} runs, signal -> exit median {statistics.median(lat)*1000:.0f} ms, "
      f"min {min(lat)*1000:.0f} ms, max {max(lat)*1000:.0f} ms (goal 1000 ms); managed untagged images left: "
      f"{len(left)}; build containers left a minute later: {len(kept)}")
EOF
  exit 0
fi
echo "bench-bastion: timing the reuse path of $tag with $bin" >&2
if command -v hyperfine >/dev/null 2>&1; then
  hyperfine --warmup 3 --runs "$runs" --shell=none "$cmd"
else
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do $cmd >/dev/null; done
  end=$(date +%s%N)
  echo "bench-bastion: $runs runs, mean $(( (end - start) / runs / 1000000 )) ms wall"
fi
