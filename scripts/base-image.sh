#!/usr/bin/env bash
# Builds the tests' base image without a registry: a minimal Debian root filesystem made with
# debootstrap from this machine's configured Debian mirror, loaded with `docker import`.
# The root filesystem tarball is cached, so a second run only re-imports (or does nothing).
#
#   scripts/base-image.sh [TAG]     default TAG: eas-test-base:bookworm
set -euo pipefail

tag=${1:-eas-test-base:bookworm}
suite=${EAS_BASE_SUITE:-bookworm}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/eas/base
tarball=$cache/$suite-rootfs.tar

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base-image: $tag present"
  exit 0
fi

mirror=${EAS_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # The first deb URI this machine's apt uses; the mirror is configuration, not code.
  mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -v security | head -n 1 | awk '{ print $2 }' || true)
fi
if [ -z "$mirror" ]; then
  echo "base-image: no Debian mirror configured; set EAS_DEBIAN_MIRROR" >&2
  exit 1
fi

if [ ! -s "$tarball" ]; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq debootstrap >/dev/null
  fi
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/root.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  # python3 and git are what the bastion and the node stand-in need; ca-certificates lets a
  # host CA bundle be added with update-ca-certificates.
  debootstrap --variant=minbase --include=ca-certificates,python3,python3-venv,git,curl,procps \
    "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
  tar -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
docker import --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
echo "base-image: imported $tag from $tarball"
