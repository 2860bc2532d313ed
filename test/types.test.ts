// One program type-checks for both backends, as a user compiles it: every example in examples/ and every
// TypeScript block of README.md, against the package's own declarations (dist/src/index.d.ts, through its
// `exports`), with examples/tsconfig.json's strict settings, without a cast; plus what the types promise
// (toHost typed by the dtype, the portable group's collectives taking the tensors its `tensors` make),
// and what they refuse. README's first example is examples/mlp.ts.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import ts from "typescript";
import { PACKAGE_ROOT } from "../src/paths.js";

const examples = path.join(PACKAGE_ROOT, "examples");
const readme = fs.readFileSync(path.join(PACKAGE_ROOT, "README.md"), "utf8");
/** README's ```ts blocks: each a whole program. */
const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);

/** What the types promise and refuse; `@ts-expect-error` marks what must not compile. */
const PROMISES = `
import { HostTensor, init, matmul, Tensor, type AnyTensor, type CpuProcessGroup } from "symmkit";

// toHost() is typed by the dtype: Array.from and element arithmetic need no narrowing.
const bits: Uint16Array = HostTensor.rand([4], "bf16").toHost();
export const longs: bigint[] = Array.from(HostTensor.rand([4], "i64").toHost());
export const sum: number = HostTensor.zeros([2], "i32").toHost().reduce((a, b) => a + b, 0);
export const floats: Float32Array = HostTensor.zeros([2], "fp8e4m3").toHost({ decode: true });
declare const unknownDtype: Tensor;
export const named: Int32Array = unknownDtype.toHost({ dtype: "i32" }); // checked at run time
// @ts-expect-error: a bf16 tensor's raw elements are bit patterns, not float32
export const wrong: Float32Array = HostTensor.zeros([2], "bf16").toHost();
// @ts-expect-error: a bf16 tensor asked for f32 elements
HostTensor.zeros([2], "bf16").toHost({ dtype: "f32" });

// init() without a backend: the group's collectives take the tensors its \`tensors\` make.
const group = await init();
const x = group.tensors.rand([8, 16], "bf16", { seed: 1n });
const y: AnyTensor = group.collectives.allReduce(x);
group.collectives.allReduce(x, { output: x, algorithm: "two_shot" });
const h: Uint16Array = x.toHost();
export const z: AnyTensor<"bf16"> = matmul(x, group.tensors.zeros([8, 16], "bf16"));
const sub = await group.newGroup([0]);
sub?.collectives.allGather(x, group.tensors.empty([16, 16], "bf16"));
// @ts-expect-error: an algorithm one backend lacks is not portable
group.collectives.allReduce(x, { algorithm: "lamport" });
if (group.backend === "cuda") group.synchronize(); // narrowing gives the backend's own group
const cpu: CpuProcessGroup | undefined = group.backend === "cpu" ? group : undefined;

// A backend named: its own tensors and collectives.
const host = await init({ backend: "cpu" });
const ht: HostTensor<"f32"> = host.tensors.zeros([4], "f32");
host.collectives.allReduce(ht);
// @ts-expect-error: the CPU backend's collectives take host tensors
host.collectives.allReduce(Tensor.zeros([4], "f32"));
export { bits, y, h, cpu };
`;

test("README's first example is examples/mlp.ts, from its imports on", () => {
  const mlp = fs.readFileSync(path.join(examples, "mlp.ts"), "utf8");
  const body = mlp.slice(mlp.indexOf("\nimport ") + 1);
  assert.ok(blocks.length > 0, "README has TypeScript blocks");
  assert.equal(blocks[0], body, "README's first example and examples/mlp.ts differ: copy the file into it");
});

/** The casts in `src`: `as` (but `as const`), `<T>x`, and @ts- comments. */
function casts(name: string, src: string): string[] {
  const file = ts.createSourceFile(name, src, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    const isConst = ts.isAsExpression(node) && node.type.getText(file) === "const";
    if ((ts.isAsExpression(node) && !isConst) || ts.isTypeAssertionExpression(node))
      found.push(node.getText(file));
    node.forEachChild(visit);
  };
  visit(file);
  return [...found, ...(src.match(/\/\/\s*@ts-\S+/g) ?? [])];
}

test("examples and README's TypeScript have no casts", () => {
  assert.deepEqual(casts("probe.ts", "const a = b as Foo; const c = [1] as const; // @ts-ignore"), [
    "b as Foo",
    "// @ts-ignore",
  ]);
  const sources = [
    ...fs
      .readdirSync(examples)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => [`examples/${f}`, fs.readFileSync(path.join(examples, f), "utf8")] as const),
    ...blocks.map((b, i) => [`README block ${i + 1}`, b] as const),
  ];
  for (const [name, src] of sources) assert.deepEqual(casts(name, src), [], `${name} has casts`);
});

test("tsc --noEmit: every example, README's TypeScript and the type promises, against the package", () => {
  assert.ok(
    fs.existsSync(path.join(PACKAGE_ROOT, "dist", "src", "index.d.ts")),
    "npm run build makes the declarations",
  );
  const config = ts.getParsedCommandLineOfConfigFile(
    path.join(examples, "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) =>
        assert.fail(ts.flattenDiagnosticMessageText(d.messageText, "\n")),
    },
  );
  assert.ok(config);
  // The virtual programs live in examples/, so that "symmkit" resolves to this package as for the examples.
  const virtual = new Map<string, string>([
    ...blocks.map((b, i) => [path.join(examples, `readme-block-${i + 1}.ts`), b] as const),
    [path.join(examples, "type-promises.ts"), PROMISES],
  ]);
  const options = { ...config.options, noEmit: true };
  const host = ts.createCompilerHost(options);
  const real = {
    fileExists: host.fileExists.bind(host),
    readFile: host.readFile.bind(host),
    getSourceFile: host.getSourceFile.bind(host),
  };
  host.fileExists = (f) => virtual.has(f) || real.fileExists(f);
  host.readFile = (f) => virtual.get(f) ?? real.readFile(f);
  host.getSourceFile = (f, lang, ...rest) => {
    const text = virtual.get(f);
    return text === undefined
      ? real.getSourceFile(f, lang, ...rest)
      : ts.createSourceFile(f, text, lang, true, ts.ScriptKind.TS);
  };
  const program = ts.createProgram([...config.fileNames, ...virtual.keys()], options, host);
  const diagnostics = ts.getPreEmitDiagnostics(program);
  const said = ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => PACKAGE_ROOT,
    getNewLine: () => "\n",
  });
  assert.equal(diagnostics.length, 0, said);
  // Each example was part of the program, and resolved "symmkit" to the package's declarations.
  const index = path.join(PACKAGE_ROOT, "dist", "src", "index.d.ts");
  assert.ok(program.getSourceFile(index), "symmkit resolved to dist/src/index.d.ts");
  for (const f of fs.readdirSync(examples).filter((e) => e.endsWith(".ts")))
    assert.ok(program.getSourceFile(path.join(examples, f)), `${f} was checked`);
});
