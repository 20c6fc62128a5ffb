#!/usr/bin/env bash
# The longest functions in src/ (test modules left out), longest first: lines from the `fn`
# line to its closing brace. Usage: scripts/longest-fns.sh [N] (default 5).
# A test module is a `#[cfg(test)] mod`: an inline one is skipped to its closing brace, and the
# file of an out-of-line one (`#[cfg(test)] mod tests;`, maybe with `#[path]`) is not read.
# Any other `#[cfg(test)]` item (a helper fn, an `impl`) is code like the rest and is counted;
# the scan goes on past it.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "${1:-5}" <<'PY'
import os, re, sys
n = int(sys.argv[1])
fn = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)')
test_mod = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?mod\s+([A-Za-z0-9_]+)\s*([;{])')
path_attr = re.compile(r'^\s*#\[path\s*=\s*"([^"]+)"\]')


def code_of(line):
    """The line without char and string literals (one line) and its `//` comment."""
    code = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return re.sub(r'"(\\.|[^"\\])*"', '""', code).split("//")[0]


def block_end(lines, i, end):
    """The index of the line closing the block opened at or after line i (or the `;` line)."""
    depth, started, j = 0, False, i
    while j < end:
        code = code_of(lines[j])
        depth += code.count("{") - code.count("}")
        started = started or "{" in code
        if started and depth <= 0:
            return j, True
        if not started and code.rstrip().endswith(";"):
            return j, False
        j += 1
    return end - 1, started


def test_mods(path, lines):
    """Line ranges of the file's inline `#[cfg(test)] mod`s, and the files of its out-of-line ones."""
    skip, files = [], []
    for i, l in enumerate(lines):
        if l.strip() != "#[cfg(test)]":
            continue
        j, where = i + 1, None
        # Past the item's other attributes, blank lines and comments, to the item.
        while j < len(lines) and (lines[j].strip().startswith(("#[", "//")) or not lines[j].strip()):
            m = path_attr.match(lines[j])
            where = m.group(1) if m else where
            j += 1
        m = test_mod.match(lines[j]) if j < len(lines) else None
        if not m:
            continue
        if m.group(4) == "{":
            skip.append((i, block_end(lines, j, len(lines))[0]))
            continue
        d, base = os.path.split(path)
        if where:
            files.append(os.path.normpath(os.path.join(d, where)))
        else:
            stem = base[:-3]
            sub = d if base in ("mod.rs", "main.rs", "lib.rs") else os.path.join(d, stem)
            files += [os.path.join(sub, m.group(3) + ".rs"), os.path.join(sub, m.group(3), "mod.rs")]
    return skip, files


sources = {}
for d, _, fs in os.walk("src"):
    for f in fs:
        if f.endswith(".rs"):
            path = os.path.normpath(os.path.join(d, f))
            sources[path] = open(path).read().split("\n")
skips, test_files = {}, set()
for path, lines in sources.items():
    skips[path], files = test_mods(path, lines)
    test_files.update(files)

found = []
for path, lines in sorted(sources.items()):
    if path in test_files:
        continue
    skipped = set()
    for a, b in skips[path]:
        skipped.update(range(a, b + 1))
    for i, l in enumerate(lines):
        if i in skipped:
            continue
        m = fn.match(l)
        if not m:
            continue
        j, started = block_end(lines, i, len(lines))
        if started:
            found.append((j - i + 1, f"{path}:{i + 1}", m.group(6)))
found.sort(key=lambda t: -t[0])
for length, where, name in found[:n]:
    print(f"{length:5d}  {name}  {where}")
PY
