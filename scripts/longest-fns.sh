#!/usr/bin/env bash
# The longest functions in src/ (test modules left out), longest first: lines from the `fn`
# line to its closing brace. Usage: scripts/longest-fns.sh [N] (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "${1:-5}" <<'PY'
import os, re, sys
n = int(sys.argv[1])
found = []
fn = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)')
for d, _, fs in os.walk("src"):
    for f in fs:
        if not f.endswith(".rs") or f.endswith("_tests.rs"):
            continue
        path = os.path.join(d, f)
        lines = open(path).read().split("\n")
        # Stop at the file's test module.
        end = next((i for i, l in enumerate(lines) if l.startswith("#[cfg(test)]")), len(lines))
        i = 0
        while i < end:
            m = fn.match(lines[i])
            if not m:
                i += 1
                continue
            depth, started, j = 0, False, i
            while j < end:
                # Braces inside char and string literals (one line) do not count.
                code = re.sub(r"'(\\.|[^'\\])'", "''", lines[j])
                code = re.sub(r'"(\\.|[^"\\])*"', '""', code).split("//")[0]
                depth += code.count("{") - code.count("}")
                started = started or "{" in code
                if started and depth <= 0:
                    break
                if not started and code.rstrip().endswith(";"):
                    break
                j += 1
            if started:
                found.append((j - i + 1, f"{path}:{i + 1}", m.group(6)))
            i += 1
found.sort(key=lambda t: -t[0])
for length, where, name in found[:n]:
    print(f"{length:5d}  {name}  {where}")
PY
