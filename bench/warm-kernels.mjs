// Compiles the shipped programs into the kernel cache with several processes at once, so that a GPU
// machine's first run does not spend minutes in NVRTC one program after another. Run from the repo root:
//   node bench/warm-kernels.mjs [arch] [processes]
import { spawn } from "node:child_process";
import os from "node:os";

const [arch = "sm_90a", n = String(Math.max(1, os.availableParallelism() - 1))] = process.argv.slice(2);
const worker = `
  const { PROGRAMS } = await import("./dist/src/catalog.js");
  const { compileProgram } = await import("./dist/src/runtime/jit/compiler.js");
  const { compileRequest } = await import("./dist/src/runtime/module.js");
  const [arch, i, n] = process.argv.slice(1);
  PROGRAMS.forEach((spec, k) => { if (k % Number(n) === Number(i)) compileProgram(compileRequest(spec, arch)); });
`;
const start = Date.now();
const codes = await Promise.all(
  Array.from(
    { length: Number(n) },
    (_, i) =>
      new Promise((resolve) =>
        spawn(process.execPath, ["--input-type=module", "-e", worker, arch, String(i), n], {
          stdio: "inherit",
        }).on("exit", resolve),
      ),
  ),
);
console.log(
  `warmed the kernel cache for ${arch} with ${n} processes in ${((Date.now() - start) / 1000).toFixed(1)} s`,
);
process.exit(codes.every((c) => c === 0) ? 0 : 1);
