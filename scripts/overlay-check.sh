#!/usr/bin/env bash
# Prints the overlay decisions (`eas overlay`) at the tips of an EAS clone's main and release
# branches and at any pull-request refs given, so an operator sees which patch rows upstream has
# merged, fixed, or moved (STOP) before pinning a new commit. Read-only for the clone's branches
# and work tree: each ref is decided in a temporary detached worktree that is removed afterwards.
#
#   scripts/overlay-check.sh CLONE [--facts FILE] [--explain] [--remote NAME] [--profiles]
#                            [--pins FILE] [PR|REF ...]
#
#   CLONE     an EAS git clone (its remote is fetched: an operator's machine, not CI)
#   --profiles  also decide at each pins profile's EAS commit, printed as a decision table
#               (row, decision, fact, source) with the STOP lines under it (needs jq)
#   --pins    the pins file for --profiles [default: pins.json next to this script]
#   PR        a pull-request number: fetches refs/pull/PR/head from the remote
#   REF       any other ref or commit the clone can resolve
#   EAS       the eas binary [default: eas on PATH]
#   EAS_MAIN_REF, EAS_RELEASE_REF   branch names [default: main, release-1.2]
#   EAS_NO_FETCH=1                  use the refs already in the clone
#
# Exit: 0 when every ref decides without a STOP, 4 when any ref STOPs, 1 or 2 on other errors.
set -euo pipefail

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 1 ] || usage
clone=$1
shift
eas_bin=${EAS:-eas}
remote=origin
profiles=false
pins_file="$(cd "$(dirname "$0")/.." && pwd)/pins.json"
args=()
extra_refs=()
while [ $# -gt 0 ]; do
  case $1 in
    --facts) [ $# -ge 2 ] || usage; args+=(--facts "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --explain) args+=(--explain); shift ;;
    --remote) [ $# -ge 2 ] || usage; remote=$2; shift 2 ;;
    --profiles) profiles=true; shift ;;
    --pins) [ $# -ge 2 ] || usage; pins_file=$2; shift 2 ;;
    -h|--help) usage ;;
    *) extra_refs+=("$1"); shift ;;
  esac
done

git -C "$clone" rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
  echo "overlay-check: $clone is not a git clone" >&2; exit 2; }

main_ref=${EAS_MAIN_REF:-main}
release_ref=${EAS_RELEASE_REF:-release-1.2}
if [ "${EAS_NO_FETCH:-}" != 1 ] && git -C "$clone" remote get-url "$remote" >/dev/null 2>&1; then
  git -C "$clone" fetch --quiet "$remote" "$main_ref" "$release_ref" || {
    echo "overlay-check: cannot fetch $main_ref and $release_ref from $remote" >&2; exit 1; }
fi

# name -> commit, in the order printed
names=()
shas=()
resolve() { # name, then candidate refs
  local name=$1 sha=""
  shift
  for cand in "$@"; do
    if sha=$(git -C "$clone" rev-parse --verify --quiet "$cand^{commit}"); then
      names+=("$name"); shas+=("$sha"); return 0
    fi
  done
  echo "overlay-check: cannot resolve $name" >&2
  return 1
}
resolve "$main_ref" "refs/remotes/$remote/$main_ref" "refs/heads/$main_ref"
resolve "$release_ref" "refs/remotes/$remote/$release_ref" "refs/heads/$release_ref"
for r in "${extra_refs[@]}"; do
  if [[ $r =~ ^[0-9]+$ ]]; then
    if [ "${EAS_NO_FETCH:-}" != 1 ]; then
      # Into FETCH_HEAD only: no ref is created in the clone.
      git -C "$clone" fetch --quiet "$remote" "refs/pull/$r/head" || {
        echo "overlay-check: cannot fetch pull request $r from $remote" >&2; exit 1; }
      resolve "PR #$r" FETCH_HEAD
    else
      resolve "PR #$r" "refs/pull/$r/head"
    fi
  else
    resolve "$r" "$r"
  fi
done

# Pins profiles: name -> commit, decided as a table. Their tags and branches must be in the clone
# (fetched above for main and release-1.2; `git fetch --tags` for the rest).
tables=()
if [ "$profiles" = true ]; then
  command -v jq >/dev/null || { echo "overlay-check: --profiles needs jq" >&2; exit 2; }
  [ -f "$pins_file" ] || { echo "overlay-check: no pins file $pins_file" >&2; exit 2; }
  while IFS=$'\t' read -r profile ref prefix; do
    if sha=$(git -C "$clone" rev-parse --verify --quiet "$prefix^{commit}"); then
      names+=("profile $profile: EAS $ref"); shas+=("$sha"); tables+=("${#names[@]}")
    else
      echo "overlay-check: profile $profile: EAS $prefix ($ref) is not in the clone; fetch it first" >&2
      exit 1
    fi
  done < <(jq -r '.pins[] | select(.name == "eas" and .sha != null) | [.profile, .ref, .sha] | @tsv' "$pins_file")
fi
is_table() { local n=$1 t; for t in "${tables[@]}"; do [ "$t" = "$n" ] && return 0; done; return 1; }
here=$(cd "$(dirname "$0")" && pwd)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/eas-overlay-check.XXXXXX")
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  for wt in "$scratch"/*/; do
    if [ -d "$wt" ]; then
      git -C "$clone" worktree remove --force "$wt" >/dev/null 2>&1 || true
    fi
  done
  git -C "$clone" worktree prune >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

worst=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  sha=${shas[$i]}
  wt="$scratch/$i"
  git -C "$clone" worktree add --quiet --detach "$wt" "$sha"
  echo "== $name at $sha"
  set +e
  if is_table "$((i + 1))"; then
    "$eas_bin" --progress plain overlay --repo "$wt" "${args[@]}" >"$scratch/out" 2>"$scratch/err"
    rc=$?
    grep -v '^STOP: ' "$scratch/err" >&2
    "$here/decision-table.sh" "$scratch/err" <"$scratch/out"
  else
    "$eas_bin" --progress plain overlay --repo "$wt" "${args[@]}"
    rc=$?
  fi
  set -e
  case $rc in
    0) ;;
    4) worst=4 ;;
    *) [ "$worst" = 4 ] || worst=$rc ;;
  esac
  git -C "$clone" worktree remove --force "$wt"
done
exit "$worst"
