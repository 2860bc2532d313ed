// Structs shared between the device headers and the host, laid out from the headers by the C rules.
// NVRTC has no offsetof, so the headers can fix only sizes (static_assert); the tests read a struct's
// members from the header text and compute each offset from the size and alignment of its type, to
// compare with the host's named offset tables (test/gemm-layout.test.ts, test/device-layouts.test.ts).
// It reads the plain member declarations symmkit's shared structs use: scalar types, pointers, arrays
// (of literal or constexpr length), nested structs (flattened), alignas on the struct or a member.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { DEVICE_INCLUDE_DIR } from "../../src/paths.js";

/** One member, or (for a member of struct type) one member of that struct, named in camelCase with
 * the outer member's name as prefix (GemmArgs' `env.timeout_ns` is `envTimeoutNs`). Arrays are
 * named by their first element. */
export interface Field {
  readonly name: string;
  readonly offset: number;
  /** The member's declared name as written (a nested member's path joined with "."). */
  readonly path: string;
  /** True for the struct's own members; false for those of a nested struct, flattened. */
  readonly top: boolean;
}

export interface Layout {
  readonly fields: readonly Field[];
  readonly size: number;
  readonly align: number;
}

/** The text of headers under device/include/symmkit, e.g. headers("sync/wait.cuh", "sync/barrier.cuh"). */
export const headers = (...names: string[]): string =>
  names.map((n) => fs.readFileSync(path.join(DEVICE_INCLUDE_DIR, "symmkit", n), "utf8")).join("\n");

export const camel = (s: string): string => s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/** Size and alignment of the scalar types (core/types.cuh, and the CUDA built-ins). */
const SCALARS: Readonly<Record<string, readonly [number, number]>> = {
  bool: [1, 1],
  char: [1, 1],
  i8: [1, 1],
  u8: [1, 1],
  i16: [2, 2],
  u16: [2, 2],
  i32: [4, 4],
  u32: [4, 4],
  int: [4, 4],
  unsigned: [4, 4],
  float: [4, 4],
  i64: [8, 8],
  u64: [8, 8],
  double: [8, 8],
};
const POINTER: readonly [number, number] = [8, 8];

const stripComments = (s: string): string => s.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/\/\/[^\n]*/g, "");

/** The body of `struct [alignas(N)] name { ... };` (between the braces) and its alignas, if any. */
function structBody(sources: string, name: string): { body: string; alignas: number } {
  const m = new RegExp(`\\bstruct\\s+(?:alignas\\((\\d+)\\)\\s+)?${name}\\s*\\{`).exec(sources);
  assert.ok(m, `struct ${name} not found`);
  const start = m.index + m[0].length;
  let depth = 1;
  let i = start;
  for (; depth > 0; i++) {
    assert.ok(i < sources.length, `struct ${name}: no closing brace`);
    if (sources[i] === "{") depth++;
    else if (sources[i] === "}") depth--;
  }
  return { body: sources.slice(start, i - 1), alignas: Number(m[1] ?? 1) };
}

/** The value of `constexpr <type> name = <integer>;` in the sources. */
export function constant(sources: string, name: string): number {
  const m = new RegExp(`\\bconstexpr\\s+[A-Za-z0-9_:]+\\s+${name}\\s*=\\s*(\\d+)[uUlL]*\\s*;`).exec(sources);
  assert.ok(m, `constexpr ${name} not found`);
  return Number(m[1]);
}

/** The N of `static_assert(sizeof(name) == N, ...)` in the sources, if there is one. */
export function assertedSize(sources: string, name: string): number | undefined {
  const m = new RegExp(`static_assert\\(\\s*sizeof\\(${name}\\)\\s*==\\s*(\\d+)`).exec(sources);
  return m ? Number(m[1]) : undefined;
}

/** The members of `struct name { ... };` in `sources`, laid out by the C rules. */
export function structLayout(sources: string, name: string): Layout {
  const text = stripComments(sources);
  const { body, alignas } = structBody(text, name);
  // Member functions' bodies and brace initialisers become statement ends; what remains is one
  // statement per member, function or other declaration.
  let flat = body;
  for (let prev = ""; prev !== flat;) {
    prev = flat;
    flat = flat.replace(/\{[^{}]*\}/g, ";");
  }
  let offset = 0;
  let align = alignas;
  const fields: Field[] = [];
  for (const raw of flat.split(";")) {
    let stmt = raw
      .replace(/\b(?:public|private|protected)\s*:/g, "")
      .replace(/\s+/g, " ")
      .trim();
    if (stmt === "" || /^(?:static|using|typedef|friend|template|constexpr|enum|struct)\b/.test(stmt))
      continue;
    let memberAlign = 1;
    const alignasMember = /^alignas\((\d+)\)\s*/.exec(stmt);
    if (alignasMember) {
      memberAlign = Number(alignasMember[1]);
      stmt = stmt.slice(alignasMember[0].length);
    }
    if (stmt.includes("(")) continue; // a member function (or a constructor)
    const decl =
      /^(?:(?:const|volatile)\s+)*((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)(?:\s+const)?\s*(.*)$/.exec(
        stmt,
      );
    assert.ok(decl, `cannot read "${stmt}" in ${name}`);
    const type = decl[1]!.replace(/^.*::/, "");
    for (const part of decl[2]!.split(",")) {
      const d = /^(\**)\s*(?:const\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*((?:\[[^\]]+\]\s*)*)$/.exec(part.trim());
      assert.ok(d, `cannot read the declarator "${part.trim()}" of "${stmt}" in ${name}`);
      const [, stars, member, dims] = d;
      let count = 1;
      for (const [, dim] of dims!.matchAll(/\[\s*([^\]]+?)\s*\]/g)) {
        const n = /^(\d+)[uUlL]*$/.exec(dim!);
        count *= n ? Number(n[1]) : constant(text, dim!);
      }
      let size: number;
      let a: number;
      let inner: Layout | undefined;
      if (stars) [size, a] = POINTER;
      else if (SCALARS[type]) [size, a] = SCALARS[type];
      else {
        inner = structLayout(sources, type);
        [size, a] = [inner.size, inner.align];
      }
      a = Math.max(a, memberAlign);
      offset = Math.ceil(offset / a) * a;
      align = Math.max(align, a);
      fields.push({ name: camel(member!), offset, path: member!, top: true });
      if (inner)
        for (const f of inner.fields)
          fields.push({
            name: camel(`${member!}_${f.name}`),
            offset: offset + f.offset,
            path: `${member!}.${f.path}`,
            top: false,
          });
      offset += size * count;
    }
  }
  assert.ok(fields.length > 0, `struct ${name} has no members`);
  return { fields, size: Math.ceil(offset / align) * align, align };
}

/**
 * Checks a host table `{ field: offset, ..., bytes }` against the struct as the headers lay it out:
 * every named offset, and the size. With `everyMember`, the table must also name each of the struct's
 * own members (and nothing else), so a member added on the device side is noticed here.
 */
export function checkLayout(
  sources: string,
  name: string,
  table: Readonly<Record<string, number>>,
  options: { everyMember?: boolean } = {},
): Layout {
  const l = structLayout(sources, name);
  const { bytes, ...offsets } = table;
  assert.equal(
    l.size,
    bytes,
    `${name} size: the header's struct is ${l.size} bytes, the host's table says ${bytes}`,
  );
  const byName = new Map(l.fields.map((f) => [f.name, f.offset]));
  for (const [field, offset] of Object.entries(offsets))
    assert.equal(byName.get(field), offset, `${name}.${field}: the header puts it at ${byName.get(field)}`);
  if (options.everyMember)
    assert.deepEqual(
      Object.keys(offsets).sort(),
      l.fields
        .filter((f) => f.top)
        .map((f) => f.name)
        .sort(),
      `${name}: the host's table names other members than the header's struct has`,
    );
  return l;
}
