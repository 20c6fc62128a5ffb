#!/usr/bin/env bash
# Installs k3d at a pinned version, verified against the sha256 its release publishes
# (`checksums.txt`, lines `<sha256>  _dist/k3d-linux-amd64`: k3d's release job runs
# `make gen-checksum`, i.e. `sha256sum _dist/* > _dist/checksums.txt`, and publishes `_dist/*`;
# k3d-io/k3d@d6017c01 Makefile, @45ea7516 .github/workflows/release.yaml), into DEST (default
# /usr/local/bin, through sudo when that is not writable). Nothing is installed on a mismatch.
#
#   scripts/install-k3d.sh VERSION [DEST]
#   K3D_BASE_URL   release download base [default: https://github.com/k3d-io/k3d/releases/download]
#   K3D_ASSET      the asset [default: k3d-linux-amd64]
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version=$1
dest=${2:-/usr/local/bin}
base=${K3D_BASE_URL:-https://github.com/k3d-io/k3d/releases/download}
asset=${K3D_ASSET:-k3d-linux-amd64}
case $version in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "install-k3d: $version is not a pinned vX.Y.Z" >&2; exit 2 ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 --connect-timeout 30 -o "$tmp/$asset" "$base/$version/$asset"
curl -fsSL --retry 3 --connect-timeout 30 -o "$tmp/checksums.txt" "$base/$version/checksums.txt"

expected=$(awk -v a="$asset" '{ n = $2; sub(/^\*/, "", n); sub(/.*\//, "", n); if (n == a) { print $1; exit } }' "$tmp/checksums.txt")
if ! [[ $expected =~ ^[0-9a-f]{64}$ ]]; then
  echo "install-k3d: $base/$version/checksums.txt has no sha256 for $asset" >&2
  exit 1
fi
computed=$(sha256sum "$tmp/$asset" | cut -d' ' -f1)
if [ "$computed" != "$expected" ]; then
  echo "install-k3d: checksum failed for $base/$version/$asset: expected sha256 $expected, computed $computed" >&2
  exit 1
fi
chmod 0755 "$tmp/$asset"
sudo=()
if [ ! -w "$dest" ]; then sudo=(sudo); fi
"${sudo[@]}" install -m 0755 "$tmp/$asset" "$dest/k3d"
echo "install-k3d: k3d $version ($asset, sha256 $computed) installed in $dest" >&2
