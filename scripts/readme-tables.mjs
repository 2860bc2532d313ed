// Writes README's table of algorithms from the records (src/ops/algorithm-table.ts), after a build: a new
// algorithm's row comes from its record. test/algorithms.test.ts checks that README holds what this writes.
//   npm run build && npm run tables
import fs from "node:fs";

const { algorithmTable } = await import("../dist/src/ops/algorithm-table.js");
const file = new URL("../README.md", import.meta.url);
const readme = fs.readFileSync(file, "utf8");
const marked = /(<!-- algorithms:begin -->\n)[\s\S]*?(\n<!-- algorithms:end -->)/;
if (!marked.test(readme)) throw new Error("README.md has no algorithms table between its markers");
fs.writeFileSync(
  file,
  readme.replace(marked, (_, begin, end) => `${begin}${algorithmTable()}${end}`),
);
