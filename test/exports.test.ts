// The public API is what src/index.ts exports, and docs/api.md lists exactly that: one list item per
// export, its name in backticks first (`- \`Name\` — what it is`). Every class in src/ is exported or
// named below as internal, with the reason; every error class is exported and docs/api.md gives its code.
// Adding an export without documenting it, or a class without deciding whether it is public, fails here.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import ts from "typescript";
import * as api from "../src/index.js";
import { PACKAGE_ROOT } from "../src/paths.js";

/**
 * Classes exported by their modules for other modules of symmkit, never handed to a user: not in
 * src/index.ts on purpose. A new `export class` must be exported from src/index.ts or added here.
 */
const INTERNAL: Readonly<Record<string, string>> = {
  // src/cuda/native.ts: the FFI layer's native scratch memory (argument blocks, CUDA structs).
  NativeBlock: "native memory for FFI calls; Kernel, TMA maps and cuBLASLt plans keep it private",
  // src/cpu/shared-memory.ts
  SharedRegion: "the memfd mapping under CpuSymmetricTensor; users see HostTensor views of it",
  // src/distributed/fd-channel.ts, fd-exchange.ts: how local ranks pass file descriptors.
  FdChannel: "the SCM_RIGHTS socket under FdExchange; its failure surfaces as FdTimeoutError",
  FdExchange: "descriptor passing inside a job, made by init(); groups use it, users never do",
  // src/cli/: the symmkit command's own pieces.
  CliCommand: "the symmkit command's commander Command (lazy options, one-line usage errors); src/cli only",
  UsageError: "a command line the symmkit command refuses (exit code 2), caught by src/cli.ts",
  // src/distributed/nccl-watchdog.ts
  NcclWatchdog: "made by a group's NcclComm; its failure surfaces as NcclTimeoutError",
  // src/distributed/store/protocol.ts: the store's wire format, behind StoreClient and StoreServer.
  FrameWriter: "the store protocol's frame encoder, used by StoreClient and StoreServer only",
  FrameReader: "the store protocol's frame decoder, used by StoreClient and StoreServer only",
  FrameSplitter: "splits the store's TCP stream into frames, inside StoreClient and StoreServer",
  // src/ops/gpu-group.ts and the families GpuCollectives routes to (src/ops/coll, fused, norm, exchange, moe)
  GpuGroup:
    "one GPU group's context (staging buffer, mailbox, inbox, NCCL, tune table, call counter) that " +
    "GpuCollectives makes and hands to each op family; users hold the collectives",
  GpuColl:
    "GpuCollectives' engine for allReduce, allGather, reduceScatter and barrier; users call those on collectives",
  FusedMatmul:
    "GpuCollectives' engine for the fused matmuls; users call collectives.allGatherMatmul / " +
    "matmulReduceScatter / matmulAllReduce, and collectives.fusedMatmul is typed as a Pick",
  // src/ops/memo.ts
  Memo3: "a cache of kernel handles by key triple for the collectives' eager call paths, internal to src/ops",
  ArNorm: "GpuCollectives' engine for allReduceRmsNorm; users call collectives.allReduceRmsNorm",
  GpuPointToPoint: "GpuCollectives' engine for send, recv and sendRecv; users call those on collectives",
  GpuAllToAll: "GpuCollectives' engine for allToAll and allToAllV; users call those on collectives",
  CopyEngineAllToAll: "GpuAllToAll's engine for allToAll's copy_engine; users call collectives.allToAll",
  // src/runtime/side-stream.ts
  SideStream: "a stream forked from and joined to a caller's, for ops that split their work over two",
  GpuMoe: "GpuCollectives' engine for MoE dispatch and combine; users call collectives.dispatch / combine",
  // src/cpu/group.ts, src/cpu/exchange.ts
  CpuGroup:
    "CpuCollectives' private context (pads, staging buffer, call numbers, fingerprints) that its op " +
    "families share; users call collectives",
  CpuExchange:
    "CpuCollectives' engine for send/recv, sendRecv, allToAll and allToAllV, built from its group " +
    "context; users call those on collectives",
  // src/ops/gemm/split-scratch.ts
  SplitScratch: "split-K's per-stream scratch that HopperGemm and DecodeGemm share; users only see launches",
  // src/distributed/group-base.ts
  GroupBase:
    "abstract base of ProcessGroup and CpuProcessGroup (protected constructor); users get those, " +
    "whose members docs/api.md describes",
};

/** Every .ts file under src/, parsed (syntax only), by path relative to the package. */
function parseSources(): Map<string, ts.SourceFile> {
  const files = new Map<string, ts.SourceFile>();
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) {
        const rel = path.relative(PACKAGE_ROOT, p);
        files.set(rel, ts.createSourceFile(rel, fs.readFileSync(p, "utf8"), ts.ScriptTarget.Latest, true));
      }
    }
  };
  walk(path.join(PACKAGE_ROOT, "src"));
  return files;
}

const SOURCES = parseSources();
const INDEX = path.join("src", "index.ts");

const hasModifier = (node: ts.Node, kind: ts.SyntaxKind): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);

/** The source file a relative module specifier ("./errors.js") of `from` names. */
function resolve(from: string, specifier: string): ts.SourceFile {
  const rel = path.join(path.dirname(from), specifier.replace(/\.js$/, ".ts"));
  const file = SOURCES.get(rel);
  assert.ok(file, `${from}: cannot find ${specifier} (looked for ${rel})`);
  return file;
}

/**
 * The type-only exports of a module: `export type { X }`, `export { type X as Y }` (Y), interfaces and
 * type aliases declared there, and those of the modules it re-exports with `export *`.
 */
function typeExports(file: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  for (const stmt of file.statements) {
    if (ts.isExportDeclaration(stmt)) {
      const target = stmt.moduleSpecifier;
      if (!stmt.exportClause) {
        assert.ok(target && ts.isStringLiteral(target), `${file.fileName}: export * without a module`);
        for (const n of typeExports(resolve(file.fileName, target.text))) names.add(n);
      } else if (ts.isNamedExports(stmt.exportClause)) {
        for (const el of stmt.exportClause.elements)
          if (stmt.isTypeOnly || el.isTypeOnly) names.add(el.name.text);
      } else {
        assert.fail(`${file.fileName}: export * as ${stmt.exportClause.name.text} is not handled here`);
      }
    } else if (
      (ts.isInterfaceDeclaration(stmt) || ts.isTypeAliasDeclaration(stmt)) &&
      hasModifier(stmt, ts.SyntaxKind.ExportKeyword)
    ) {
      names.add(stmt.name.text);
    }
  }
  return names;
}

const RUNTIME_EXPORTS = new Set(Object.keys(api));
const TYPE_EXPORTS = typeExports(SOURCES.get(INDEX)!);
const EXPORTS = new Set([...RUNTIME_EXPORTS, ...TYPE_EXPORTS]);

/** docs/api.md's list items that open with a name in backticks: name -> the item's line. */
function documented(): Map<string, string> {
  const text = fs.readFileSync(path.join(PACKAGE_ROOT, "docs", "api.md"), "utf8");
  const items = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^\s*[-*] `([^`]+)`/.exec(line);
    if (!m) continue;
    assert.ok(!items.has(m[1]!), `docs/api.md lists ${m[1]} twice`);
    items.set(m[1]!, line);
  }
  return items;
}

const DOCS = documented();

interface ClassInfo {
  readonly name: string;
  readonly file: string;
  readonly exported: boolean;
  /** The class it extends, by name (undefined: none). */
  readonly base: string | undefined;
  /** The SYMMKIT_* string literals in its body (an error class's code). */
  readonly codes: readonly string[];
}

/** Every class declared at the top level of a file in src/. */
function classes(): ClassInfo[] {
  const out: ClassInfo[] = [];
  for (const [file, sf] of SOURCES) {
    for (const stmt of sf.statements) {
      if (!ts.isClassDeclaration(stmt) || !stmt.name) continue;
      const ext = stmt.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0];
      const codes: string[] = [];
      const visit = (n: ts.Node): void => {
        if (ts.isStringLiteral(n) && /^SYMMKIT_[A-Z0-9_]+$/.test(n.text)) codes.push(n.text);
        n.forEachChild(visit);
      };
      stmt.members.forEach(visit);
      out.push({
        name: stmt.name.text,
        file,
        exported: hasModifier(stmt, ts.SyntaxKind.ExportKeyword),
        base: ext && ts.isIdentifier(ext.expression) ? ext.expression.text : undefined,
        codes,
      });
    }
  }
  return out;
}

const CLASSES = classes();
/** The exported classes by name (the public API is one namespace, so a name is exported once). */
const EXPORTED_CLASSES = new Map<string, ClassInfo>();
for (const c of CLASSES) {
  if (!c.exported) continue;
  const seen = EXPORTED_CLASSES.get(c.name);
  assert.ok(!seen, `two exported classes named ${c.name}: ${seen?.file} and ${c.file}`);
  EXPORTED_CLASSES.set(c.name, c);
}

/** The error codes: the members of ErrorCode in src/errors.ts. */
function errorCodes(): string[] {
  const sf = SOURCES.get(path.join("src", "errors.ts"))!;
  const alias = sf.statements.find(
    (s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === "ErrorCode",
  );
  assert.ok(alias && ts.isUnionTypeNode(alias.type), "ErrorCode is not a union in src/errors.ts");
  return alias.type.types.map((t) => {
    assert.ok(ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal), "ErrorCode: a non-string member");
    return t.literal.text;
  });
}

/**
 * SymmkitError's subclasses, directly or through another error, with their codes (a class that passes
 * none to super has its base's). A base is looked up among the exported classes, then the file's own.
 */
function errorClasses(): Map<ClassInfo, readonly string[]> {
  const baseOf = (c: ClassInfo): ClassInfo | undefined =>
    c.base === undefined
      ? undefined
      : (CLASSES.find((o) => o.name === c.base && o.file === c.file) ?? EXPORTED_CLASSES.get(c.base));
  const isError = (c: ClassInfo): boolean =>
    c.base === "SymmkitError" || (baseOf(c) !== undefined && isError(baseOf(c)!));
  const codesOf = (c: ClassInfo): readonly string[] =>
    c.codes.length > 0 || c.base === "SymmkitError" || !baseOf(c) ? c.codes : codesOf(baseOf(c)!);
  const out = new Map<ClassInfo, readonly string[]>();
  for (const c of CLASSES) if (isError(c)) out.set(c, codesOf(c));
  return out;
}

const ERRORS = errorClasses();

test("docs/api.md lists exactly what src/index.ts exports", () => {
  assert.ok(RUNTIME_EXPORTS.size > 50 && TYPE_EXPORTS.size > 20, "the exports were not found");
  const undocumented = [...EXPORTS].filter((n) => !DOCS.has(n)).sort();
  const notExported = [...DOCS.keys()].filter((n) => !EXPORTS.has(n)).sort();
  assert.deepEqual(undocumented, [], "exported but not in docs/api.md: add a line for each");
  assert.deepEqual(notExported, [], "in docs/api.md but not exported from src/index.ts");
});

test("every line of docs/api.md's lists says what the export is", () => {
  for (const [name, line] of DOCS)
    assert.match(line, /^\s*[-*] `[^`]+` — \S/, `${name}: "- \`Name\` — what"`);
});

test("every exported class in src/ is public (src/index.ts) or internal for a stated reason", () => {
  const undecided: string[] = [];
  for (const [name, c] of EXPORTED_CLASSES) {
    if (!RUNTIME_EXPORTS.has(name) && !(name in INTERNAL)) undecided.push(`${c.file}: ${name}`);
  }
  assert.deepEqual(
    undecided,
    [],
    "export these from src/index.ts (and list them in docs/api.md), or add to INTERNAL",
  );
  for (const [name, reason] of Object.entries(INTERNAL)) {
    assert.ok(EXPORTED_CLASSES.has(name), `INTERNAL names ${name}, which is no exported class in src/`);
    assert.ok(!EXPORTS.has(name), `${name} is in INTERNAL but src/index.ts exports it`);
    assert.ok(reason.length > 10, `${name}: say why it is internal`);
  }
});

test("every error class is exported, and docs/api.md gives its code on its line", () => {
  assert.ok(ERRORS.size >= 15, `only ${ERRORS.size} error classes found`);
  const SymmkitError = api.SymmkitError;
  for (const [{ name, file, exported }, codes] of ERRORS) {
    assert.ok(exported && RUNTIME_EXPORTS.has(name), `${name} (${file}) is not exported from src/index.ts`);
    const ctor = (api as Record<string, unknown>)[name];
    assert.ok(
      typeof ctor === "function" && ctor.prototype instanceof SymmkitError,
      `${name} is exported but is not a SymmkitError`,
    );
    assert.ok(codes.length > 0, `${name}: no SYMMKIT_* code found in its class`);
    const line = DOCS.get(name);
    assert.ok(line, `${name} is not in docs/api.md`);
    for (const code of codes)
      assert.ok(line.includes(`\`${code}\``), `docs/api.md: ${name}'s line lacks ${code}`);
  }
});

test("docs/api.md names every error code", () => {
  const text = fs.readFileSync(path.join(PACKAGE_ROOT, "docs", "api.md"), "utf8");
  const codes = errorCodes();
  assert.ok(codes.length > 10, "the error codes were not found");
  assert.deepEqual(
    codes.filter((c) => !text.includes(`\`${c}\``)),
    [],
    "docs/api.md does not name these codes",
  );
  for (const c of new Set([...ERRORS.values()].flat()))
    assert.ok(codes.includes(c), `an error class uses ${c}, which is not an ErrorCode`);
});
