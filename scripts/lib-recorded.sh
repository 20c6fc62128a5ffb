# shellcheck shell=bash
# Sourced by scripts/demo.sh, scripts/bench-plan.sh and scripts/bench-facts.sh: the synthetic
# EAS/EI/EAT trees with pins pointing at them, the recorded-cluster server held up by a FIFO, and
# the benchmarks' timed run and median.
# Sourcing it makes the work directory "$work" and a cleanup, on exit, that stops the server and
# removes the directory.

work=$(mktemp -d)
server_pid=
cleanup() {
  exec 3>&- 2>/dev/null || true
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# synthetic_trees WORK AUTHOR [SOURCE]: git repositories of fixtures/synthetic/{eas,ei,eat} under
# WORK/repos, and WORK/pins.json: the real pins.json with the tree rows locked to their commits
# (and their source set to SOURCE when given).
synthetic_trees() {
  local work=$1 author=$2 source=${3:-} n
  mkdir -p "$work/repos"
  for n in eas ei eat; do
    cp -r "fixtures/synthetic/$n" "$work/repos/$n"
    git -C "$work/repos/$n" init -q -b main
    git -C "$work/repos/$n" add -A
    git -C "$work/repos/$n" -c user.name="$author" -c user.email="$author@example.invalid" commit -qm "synthetic $n"
  done
  python3 - "$work" "$source" <<'PY'
import json, subprocess, sys
work, source = sys.argv[1], sys.argv[2]
pins = json.load(open("pins.json"))
for row in pins["pins"]:
    if row["profile"] == "main":
        repo = f"{work}/repos/{row['name']}"
        row["sha"] = subprocess.check_output(["git", "-C", repo, "rev-parse", "HEAD"], text=True).strip()
        row["locked"] = True
        if source:
            row["source"] = source
json.dump(pins, open(f"{work}/pins.json", "w"), indent=2)
PY
}

# serve_recorded SERVER FIXTURE WORK [ARGS...]: starts the recorded-cluster server on FIXTURE,
# writing WORK/kubeconfig; it serves until its stdin closes, so a FIFO held open on fd 3 keeps it
# up until the caller exits. Sets server_pid; waits up to 10 s for its address (WORK/server.out).
serve_recorded() {
  local server=$1 fixture=$2 work=$3
  shift 3
  mkfifo "$work/stdin"
  exec 3<>"$work/stdin"
  "$server" "$fixture" --kubeconfig-out "$work/kubeconfig" --quiet "$@" <&3 >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 100); do
    grep -q '^url ' "$work/server.out" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the recorded cluster did not start:" >&2
  cat "$work/server.err" >&2
  return 1
}

# timed OUT CMD...: one run of CMD, its wall seconds (bash's clock) appended to OUT as a line; its
# stdout kept in $work/stdout (or written to $timed_stdout), its stderr shown only when it fails.
# With $gnutime set (GNU time), the run's peak RSS in KiB follows on the same line.
timed() {
  local out=$1 start end rss=
  shift
  if [ -n "${gnutime:-}" ]; then set -- "$gnutime" -f '%M' -o "$work/rss" "$@"; fi
  start=$EPOCHREALTIME
  "$@" >"${timed_stdout:-$work/stdout}" 2>"$work/stderr" || { cat "$work/stderr" >&2; return 1; }
  end=$EPOCHREALTIME
  if [ -n "${gnutime:-}" ]; then rss=" $(tail -n 1 "$work/rss")"; fi
  echo "$(echo "$end - $start" | bc -l)$rss" >>"$out"
}

# median: the median of the first numbers of the lines on stdin.
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
