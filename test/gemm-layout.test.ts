// The GEMM's by-value parameter structs are laid out twice: in hopper_gemm.cuh (C++) and in
// gemm-programs.ts (the byte offsets the host writes). NVRTC has no offsetof, so this test reads the
// structs' members from the headers and lays them out by the C rules (size and alignment of each type)
// to check every offset the host uses, and the sizes the headers' static_asserts fix.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { DEVICE_INCLUDE_DIR } from "../src/paths.js";
import { FUSION_PARAMS_LAYOUT, GEMM_ARGS_LAYOUT } from "../src/ops/gemm-programs.js";

const header = (name: string): string =>
  fs.readFileSync(path.join(DEVICE_INCLUDE_DIR, "symmkit", name), "utf8");
const sources = header("gemm/hopper_gemm.cuh") + header("sync/wait.cuh");
const MAX_WORLD = 8;

interface Field {
  readonly name: string;
  readonly offset: number;
}
interface Layout {
  readonly fields: Field[];
  readonly size: number;
  readonly align: number;
}

const camel = (s: string): string => s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/** The members of `struct name { ... };` laid out by the C rules; nested structs are flattened. */
function layout(name: string): Layout {
  const m = new RegExp(`struct (?:alignas\\((\\d+)\\) )?${name} \\{([^}]*)\\};`).exec(sources);
  assert.ok(m, `struct ${name} not found`);
  let offset = 0;
  let align = Number(m[1] ?? 1);
  const fields: Field[] = [];
  for (const raw of m[2]!.split("\n")) {
    const line = raw.replace(/\/\/.*$/, "").trim();
    if (!line.endsWith(";")) continue;
    const decl = /^(?:const )?([A-Za-z0-9_]+)(\*?)\s+(.*);$/.exec(line);
    assert.ok(decl, `cannot read "${line}" in ${name}`);
    const [, type, star, names] = decl;
    let size: number;
    let a: number;
    let inner: Layout | undefined;
    if (star || /\*/.test(names!)) [size, a] = [8, 8];
    else if (type === "u32" || type === "i32" || type === "float") [size, a] = [4, 4];
    else if (type === "u64") [size, a] = [8, 8];
    else if (type === "TensorMap") [size, a] = [128, 64];
    else {
      inner = layout(type!);
      [size, a] = [inner.size, inner.align];
    }
    for (const part of names!.split(",")) {
      const nm = /\*?\s*([A-Za-z0-9_]+)(\[kMaxWorld\])?/.exec(part.trim())!;
      const count = nm[2] ? MAX_WORLD : 1;
      offset = Math.ceil(offset / a) * a;
      align = Math.max(align, a);
      if (inner)
        for (const f of inner.fields)
          fields.push({ name: camel(`${nm[1]}_${f.name}`), offset: offset + f.offset });
      else fields.push({ name: camel(nm[1]!), offset });
      offset += size * count;
    }
  }
  return { fields, size: Math.ceil(offset / align) * align, align };
}

function check(name: string, table: Readonly<Record<string, number>>): void {
  const l = layout(name);
  const { bytes, ...offsets } = table;
  assert.equal(l.size, bytes, `${name} size`);
  const byName = new Map(l.fields.map((f) => [f.name, f.offset]));
  for (const [field, offset] of Object.entries(offsets))
    assert.equal(byName.get(field), offset, `${name}.${field}: the header puts it at ${byName.get(field)}`);
}

test("GemmArgs: every offset the host writes is where hopper_gemm.cuh has the field", () => {
  check("GemmArgs", GEMM_ARGS_LAYOUT);
});

test("FusionParams: every offset the host writes is where hopper_gemm.cuh has the field", () => {
  check("FusionParams", FUSION_PARAMS_LAYOUT);
});
