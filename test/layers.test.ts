// The layers of src/ (docs/architecture.md): every import goes to the importer's layer or one below it,
// and no module reaches itself again through imports, type-only ones included.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { PACKAGE_ROOT } from "../src/paths.js";

const SRC = path.join(PACKAGE_ROOT, "src");

/** Bottom to top; a file of `src/` (or the top-level file) is in the first layer that names it. */
const LAYERS: readonly (readonly [string, readonly string[]])[] = [
  ["base", ["errors.ts", "paths.ts", "exit.ts", "settings.ts", "sleep.ts"]],
  ["libraries", ["cuda/"]],
  ["runtime", ["runtime/"]],
  ["distributed", ["distributed/"]],
  ["operations", ["ops/"]],
  ["cpu backend", ["cpu/"]],
  ["api", ["init.ts", "matmul.ts", "norm.ts", "catalog.ts"]],
  ["benchmarks", ["bench/"]],
  ["report", ["report/"]],
  ["entry points", ["cli.ts", "cli/", "doctor.ts", "demo.ts", "demo-mlp.ts", "index.ts"]],
];

function layerOf(file: string): number {
  const i = LAYERS.findIndex(([, prefixes]) => prefixes.some((p) => file === p || file.startsWith(p)));
  assert.ok(i >= 0, `src/${file} is in no layer of test/layers.test.ts (and docs/architecture.md)`);
  return i;
}

interface Import {
  readonly to: string;
  /** `import type` (or every name imported as a type): no code runs. */
  readonly typeOnly: boolean;
}

const IMPORT = /^(?:import|export)\s+(type\s+)?(?:([\w*\s{},]*?)\s+from\s+)?"(\.{1,2}\/[^"]+)"/gm;

function importsOf(file: string): Import[] {
  const text = fs.readFileSync(path.join(SRC, file), "utf8");
  return [...text.matchAll(IMPORT)].map((m) => {
    const names = m[2] ?? "";
    const braces = /\{([^}]*)\}/.exec(names)?.[1];
    const allTypes =
      braces !== undefined &&
      !/^\s*\w/.test(names.replace(/\{[^}]*\}/, "").replace(/,/g, "")) &&
      braces.split(",").every((n) => n.trim() === "" || n.trim().startsWith("type "));
    const to = path.posix.normalize(path.posix.join(path.posix.dirname(file), m[3]!)).replace(/\.js$/, ".ts");
    return { to, typeOnly: m[1] !== undefined || allTypes };
  });
}

const files = fs
  .readdirSync(SRC, { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".ts"))
  .map((f) => f.split(path.sep).join("/"));

test("src/: every import goes to the same layer or one below", () => {
  const up = files.flatMap((f) =>
    importsOf(f)
      .filter((i) => layerOf(i.to) > layerOf(f))
      .map((i) => `${f} (${LAYERS[layerOf(f)]![0]}) imports ${i.to} (${LAYERS[layerOf(i.to)]![0]})`),
  );
  assert.deepEqual(up, []);
});

test("src/: no cycle through imports, type-only ones included", () => {
  const graph = new Map(files.map((f) => [f, importsOf(f).map((i) => i.to)]));
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (f: string, trail: string[]): void => {
    state.set(f, "open");
    for (const to of graph.get(f) ?? []) {
      if (state.get(to) === "open") cycles.push([...trail.slice(trail.indexOf(to)), f, to].join(" -> "));
      else if (!state.has(to)) visit(to, [...trail, f]);
    }
    state.set(f, "done");
  };
  for (const f of files) if (!state.has(f)) visit(f, []);
  assert.deepEqual(cycles, []);
});

test("the import reader sees type-only imports and relative paths (the checks can fail)", () => {
  const probe = path.join(SRC, "runtime", "event.ts");
  assert.ok(fs.existsSync(probe));
  const imports = importsOf("runtime/event.ts");
  assert.deepEqual(
    imports.filter((i) => i.to === "runtime/stream.ts"),
    [{ to: "runtime/stream.ts", typeOnly: true }],
  );
  assert.ok(imports.some((i) => i.to === "runtime/device.ts" && !i.typeOnly));
  assert.ok(layerOf("ops/gemm/matmul.ts") > layerOf("runtime/device.ts"));
});

test("the backends' collectives stay facades: under 300 lines each, the work in the op families", () => {
  const facades = ["ops/gpu-collectives.ts", "cpu/collectives.ts"];
  const long = facades
    .map((f) => [f, fs.readFileSync(path.join(SRC, f), "utf8").split("\n").length - 1] as const)
    .filter(([, lines]) => lines >= 300)
    .map(([f, lines]) => `src/${f}: ${lines} lines; move the work into its op family`);
  assert.deepEqual(long, []);
});
