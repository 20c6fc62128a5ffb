#!/usr/bin/env bash
# Turns overlay decision lines (`fact -> choice [source]`, as `eas overlay` prints them and
# `eas up --dry-run` records them) on stdin into a Markdown table on stdout, and STOP lines
# (`STOP: ...`, from stderr) into a list under it: what a maintainer needs to regenerate a patch.
#
#   scripts/decision-table.sh [STOP-FILE] < decisions
set -euo pipefail

stops=${1:-}
echo "| row | decision | fact | source |"
echo "|---|---|---|---|"
while IFS= read -r line; do
  case $line in *" -> "*) ;; *) continue ;; esac
  fact=${line%% -> *}
  rest=${line#* -> }
  choice=${rest% \[*}
  source=${rest##* \[}
  source=${source%\]}
  row=${fact%% *}
  # A pipe inside a cell would end it.
  printf '| %s | %s | %s | %s |\n' "${row//|/\\|}" "${choice//|/\\|}" "${fact//|/\\|}" "${source//|/\\|}"
done
if [ -n "$stops" ] && grep -q '^STOP: ' "$stops" 2>/dev/null; then
  echo
  echo "STOP (regenerate before using this commit):"
  echo
  grep -E '^STOP: ' "$stops" | sed -e 's/^STOP: //' -e 's/^/    /'
fi
