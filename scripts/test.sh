#!/usr/bin/env bash
# The test command (README): starts what the tests need on a fresh machine (a Docker Engine
# and the locally built base image; no registry is reachable), then runs every cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/docker-up.sh
bash scripts/base-image.sh
cargo test --all-targets "$@"
