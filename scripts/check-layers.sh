#!/usr/bin/env bash
# Layering check. Refuses:
#  - clap or the `cli` module named outside src/cli/, src/main.rs and src/commands/;
#  - a Kubernetes call made outside src/cluster/;
#  - an error type (`Failure`, `crate::error`) named in src/plan/ (the plan model is data);
#  - a `pub` field in `Plan` (src/plan/doc.rs) or a `&mut Plan` outside src/plan/ (each plan
#    field has one writer);
#  - `Failure` (or `crate::error`) named outside src/commands/, src/pipeline/, src/error.rs and
#    src/main.rs (every other module has its own error type, mapped in src/commands/edge.rs);
#  - an exit number (1 to 5, 130) set, compared or matched outside `Kind::exit_code` in
#    src/plan/mod.rs (non-test code; `std::process::exit` too, but for 101, Rust's panic code);
#  - `pipeline` imported by any module below it (only main.rs, cli/ and commands/ may);
#  - an import from a lower layer to a higher one, in the order LAYERS below;
#  - an import cycle among the top-level modules of src/;
#  - an import cycle among the files of src/ (each file a module of its own: a `mod.rs` and the
#    children it declares are two), so no file imports one that imports it.
# An edge A -> B is any `crate::B`, `super::` or `self::` path, or a child module named bare in
# the file that declares it, from a non-test file of A to B; test modules (`#[cfg(test)] mod ...`,
# inline or a file of their own) are left out. `--files` runs only the file-level cycle check
# (and lists each cycle's edges).
#
# LAYERS, lowest first. A module imports its own layer and the ones below, never one above.
#   base      atomic bounded docker_host facts git hints installer knobs kubeconfig net output
#             pin_lock pins runtime schemas scratch secrets settings since_last snapshot sources text trees
#             (leaf services, records and pure grammars: `installer` is the installer's argv
#             grammar and output reader, which the plan and the state records name)
#   decide    config overlay (facts in, choices out)
#   plan      plan next_command error document (the phase tables and the plan model, written from
#             the decisions; `Failure` sits beside it: it is made from blockers and kinded by
#             the plan's `Kind`, and the plan names no error type)
#   state     state (the run's records under the state directory)
#   cluster   cluster (every Kubernetes call)
#   read      gather prereq verify (what the cluster, the host and Hugging Face say; the checks)
#   act       act (through Docker: the bastion, the installer run, prepare, reaping)
#   pipeline  pipeline (the runner, the up and down lists, doctor, the plan's view)
#   edge      main cli commands
set -euo pipefail
cd "$(dirname "$0")/.."
levels=(top file)
[[ "${1:-}" == "--files" ]] && levels=(file)

status=0
# forbid WHAT PATTERN ALLOWED OK: PATTERN (grep -E) may match only in files whose path matches
# ALLOWED; comment lines are left out. Prints OK when it holds, the matches when not.
forbid() {
  local hits
  if hits=$(grep -rnE "$2" src --include='*.rs' | grep -vE "$3" | grep -vE '^[^:]+:[0-9]+:\s*//'); then
    echo "check-layers: $1:" >&2
    echo "$hits" >&2
    status=1
  else
    echo "check-layers: $4"
  fi
}

forbid "clap or cli:: outside src/cli/, src/main.rs and src/commands/" '\bclap\b|\bcli::' \
  '^src/(cli/|main\.rs|commands/)' "clap and cli:: only in src/cli/, src/main.rs, src/commands/"
# Every Kubernetes call is made in src/cluster/ (one module, one error type): no API handle,
# raw request or watch is built anywhere else.
forbid "a Kubernetes call outside src/cluster/" '\bApi::|\bApi<|request_text|request_stream|await_condition' \
  '^src/cluster/' "every Kubernetes call is made in src/cluster/"
# `Failure` is the exit-code contract's type: the commands and the pipeline end with one, and
# every other module returns its own error, which src/commands/edge.rs maps (tests included:
# the mapping's tests live beside it). A quoted "Failure" (a Kubernetes Status in a test) is data.
forbid "Failure named outside src/commands/, src/pipeline/, src/error.rs and src/main.rs" \
  '(^|[^"])\bFailure\b([^"]|$)|crate::error\b' '^src/(commands/|pipeline/|error\.rs|main\.rs)' \
  "Failure only in src/commands/, src/pipeline/, src/error.rs and src/main.rs"
# The plan model is data (phase tables, the plan, blockers): turning a failure into blockers and
# blockers into a failure is the pipeline's.
if hits=$(grep -rnE '\bFailure\b|crate::error\b' src/plan --include='*.rs' | grep -vE '^[^:]+:[0-9]+:\s*//'); then
  echo "check-layers: an error type named in src/plan/:" >&2
  echo "$hits" >&2
  status=1
else
  echo "check-layers: src/plan/ names no error type"
fi
# A plan field has one writer (the table in src/plan/doc.rs): the fields are private to that
# file, so the compiler refuses a write anywhere else, and a `pub` field would undo it. Phases
# and the run write through the runner's handles (src/pipeline/runner/plan_part.rs), never a
# `&mut Plan`: the dry run's end (src/commands/up.rs) gets the plan finished, to print.
if hits=$(awk '/^pub struct Plan \{/{on=1;next} on&&/^\}/{on=0} on' src/plan/doc.rs | grep -nE '^\s*pub\b'); then
  echo "check-layers: a pub field in src/plan/doc.rs's Plan (each field has one writer):" >&2
  echo "$hits" >&2
  status=1
else
  echo "check-layers: the plan's fields are private to src/plan/doc.rs"
fi
forbid "a &mut Plan outside src/plan/" '&mut (crate::plan::)?Plan\b' '^src/plan/' "no &mut Plan outside src/plan/"

for level in "${levels[@]}"; do
if python3 - "$level" <<'PY'
import re, os, sys, collections
level = sys.argv[1]
LAYERS = [
    ("base", "atomic bounded docker_host facts git hints installer knobs kubeconfig net output "
             "pin_lock pins runtime schemas scratch secrets settings since_last snapshot sources text trees"),
    ("decide", "config overlay"),
    ("plan", "plan next_command error document"),
    ("state", "state"),
    ("cluster", "cluster"),
    ("read", "gather prereq verify"),
    ("act", "act"),
    ("pipeline", "pipeline"),
    ("edge", "main cli commands"),
]
rank = {m: i for i, (_, ms) in enumerate(LAYERS) for m in ms.split()}
layer_name = {m: n for n, ms in LAYERS for m in ms.split()}
ABOVE_PIPELINE = {"main", "cli", "commands"}

# The module tree, from main.rs through `mod x;` (and `#[path]`), test modules marked.
files = {}
def visit(f, mp, test):
    files[f] = (mp, test)
    lines = open(f).read().split("\n")
    d, base = os.path.dirname(f), os.path.basename(f)
    for i, line in enumerate(lines):
        m = re.match(r"^(?:pub(?:\([a-z]+\))? )?mod ([a-z_][a-z0-9_]*);", line)
        if not m:
            continue
        path, is_test, j = None, test, i - 1
        while j >= 0 and lines[j].startswith("#["):
            pm = re.match(r'#\[path = "([^"]+)"\]', lines[j])
            if pm:
                path = os.path.normpath(os.path.join(d, pm.group(1)))
            if lines[j].startswith("#[cfg(test)]"):
                is_test = True
            j -= 1
        if path is None:
            sub = d if base in ("mod.rs", "main.rs") else os.path.join(d, base[:-3])
            path = os.path.join(sub, m.group(1) + ".rs")
            if not os.path.exists(path):
                path = os.path.join(sub, m.group(1), "mod.rs")
        if path.startswith("src/") and os.path.exists(path):
            visit(path, mp + [m.group(1)], is_test)
visit("src/main.rs", [], False)
mods = {tuple(mp): f for f, (mp, test) in files.items() if not test}
def unit(mp):
    if level == "top":
        return tuple(mp[:1]) or ("main",)
    for k in range(len(mp), -1, -1):
        if tuple(mp[:k]) in mods:
            return tuple(mp[:k]) or ("main",)
    return ("main",)
g = collections.defaultdict(set)
where = collections.defaultdict(set)
# Exit numbers are named once, in `Kind::exit_code`: a number set as, compared with or matched
# against an exit code anywhere else (tests left out) is one place more to change.
CODE = r"(?:1|2|3|4|5|130)\b"
EXIT_NUMBER = re.compile(
    r"exit_code(?:\(\))?\s*(?:==|!=|=)\s*(?:Some\()?\s*" + CODE
    + r"|exit_code,\s*Some\([^)]*\b" + CODE
    + r"|Some\(\s*130\s*\)|process::exit\((?!101\))|ExitCode::from\(\s*\d"
    + r"|\bKind::\w+\s*=>\s*" + CODE + r"\s*,")
exit_numbers = []
for f, (me, test) in files.items():
    if test:
        continue
    text = open(f).read()
    text = re.split(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))? )?mod tests", text)[0]
    text = re.sub(r"//.*", "", text)
    if f != "src/plan/mod.rs":
        for n, line in enumerate(text.split("\n"), 1):
            if EXIT_NUMBER.search(line):
                exit_numbers.append(f"{f}:{n}: {line.strip()}")
    kids = re.findall(r"^(?:pub(?:\([a-z]+\))? )?mod ([a-z_][a-z0-9_]*);", text, re.M)
    refs = []
    for m in re.finditer(r"\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
        refs.append(m.group(1).split("::"))
    for m in re.finditer(r"\bcrate::\{([^}]*)\}", text):
        for part in m.group(1).split(","):
            part = part.strip().split("::")
            if part[0]:
                refs.append(part)
    for m in re.finditer(r"\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
        n = m.group(1).count("super::")
        refs.append(list(me)[: len(me) - n] + m.group(2).split("::"))
    for m in re.finditer(r"\b((?:super::)+)\{", text):
        refs.append(list(me)[: len(me) - m.group(1).count("super::")])
    for m in re.finditer(r"\bself::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
        refs.append(list(me) + m.group(1).split("::"))
    # A child module named bare in the file that declares it (`phases::x` beside `mod phases;`).
    for k in kids:
        for m in re.finditer(r"(?<![\w:])" + k + r"::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", text):
            refs.append(list(me) + [k] + m.group(1).split("::"))
    a = unit(list(me))
    top_a = (me[:1] or ["main"])[0]
    for r in refs:
        b = unit(r)
        if b != a and b != ("main",):
            g[a].add(b)
        top_b = r[0] if r else "main"
        if top_b != top_a and top_b in rank:
            where[(top_a, top_b)].add(f)

bad = False
if level == "top":
    # Nothing below pipeline imports it.
    up = sorted((a, f) for (a, b), fs in where.items() if b == "pipeline" and a not in ABOVE_PIPELINE for f in fs)
    for a, f in up:
        print(f"check-layers: {f} ({a}) imports pipeline, which only main.rs, cli/ and commands/ may", file=sys.stderr)
    if not up:
        print("check-layers: nothing below pipeline imports it")
    # The layers: no import from a lower layer to a higher one.
    tops = {(mp[:1] or ["main"])[0] for mp, t in files.values() if not t}
    unknown = sorted(tops - set(rank))
    for m in unknown:
        print(f"check-layers: module {m} has no layer (add it to LAYERS in scripts/check-layers.sh)", file=sys.stderr)
    upward = sorted((a, b, f) for (a, b), fs in where.items() if a in rank and rank[a] < rank[b] for f in fs)
    for a, b, f in upward:
        print(f"check-layers: {f}: {a} ({layer_name[a]}) imports {b} ({layer_name[b]}), a higher layer",
              file=sys.stderr)
    if not upward and not unknown:
        print("check-layers: no import runs from a lower layer to a higher one")
    for hit in exit_numbers:
        print(f"check-layers: an exit number outside Kind::exit_code (name the Kind): {hit}", file=sys.stderr)
    if not exit_numbers:
        print("check-layers: exit numbers are named only in Kind::exit_code")
    bad = bool(up or upward or unknown or exit_numbers)

# Cycles (Tarjan's strongly connected components).
idx, low, st, on, out, c = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in g.get(v, ()):
        if w not in idx:
            sc(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            out.append(comp)
for v in list(g):
    if v not in idx:
        sc(v)
for comp in out:
    print("cycle:", " ".join(sorted("::".join(x) for x in comp)))
    for a in sorted(comp):
        print("   ", "::".join(a), "->", ", ".join(sorted("::".join(b) for b in g[a] if b in comp)))
if not out:
    print(f"check-layers: no import cycle among src/ modules ({level} level)")
sys.exit(1 if (out or bad) else 0)
PY
then :; else
  echo "check-layers: a layer rule is broken or modules import each other in a cycle (above)" >&2
  status=1
fi
done
exit "$status"
