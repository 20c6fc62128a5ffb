#!/usr/bin/env bash
# Installs the Debian tools the tests start themselves when they are missing: tinyproxy (the
# forward proxy of tests/it/proxy.rs). Idempotent; used by scripts/test.sh.
set -euo pipefail

missing=()
command -v tinyproxy >/dev/null 2>&1 || missing+=(tinyproxy)
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
