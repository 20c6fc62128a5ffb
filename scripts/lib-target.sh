# shellcheck shell=bash
# Sourced by the scripts that run a binary they build: cargo's target directory as cargo itself
# reports it (`cargo metadata`), so CARGO_TARGET_DIR, a `build.target-dir` in a cargo config
# file, and a workspace elsewhere all find the binary cargo just built.

# target_dir: prints the absolute target directory of the package in the current directory.
target_dir() {
  local meta dir
  meta=$(cargo metadata --format-version 1 --no-deps) || return 1
  # The one top-level key holding a path; a JSON parser would be one more tool to require.
  dir=$(printf '%s' "$meta" | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  [ -n "$dir" ] || { echo "target_dir: cargo metadata names no target_directory" >&2; return 1; }
  printf '%s\n' "$dir"
}

# release_binaries: builds eas and the recorded-cluster server in release mode and sets $eas and
# $server to their paths (for the benchmarks, run from the package's directory).
release_binaries() {
  local target
  cargo build -q --release --bin eas --example cluster-server
  target=$(target_dir) || return 1
  # shellcheck disable=SC2034 # read by the script that sources this file
  eas=$target/release/eas
  # shellcheck disable=SC2034
  server=$target/release/examples/cluster-server
}
