import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import {
  findCudaHeaders,
  findLibrary,
  LIBRARIES,
  systemContext,
  type SearchContext,
} from "../src/cuda/discovery.js";
import { LibraryNotFoundError, SymmkitError } from "../src/errors.js";
import type { LibraryHandle } from "../src/cuda/native.js";

const base = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-disc-"));
after(() => fs.rmSync(base, { recursive: true, force: true }));

/** A temporary tree of empty files (removed with the rest of `base` at the end); returns its root. */
function tree(files: string[]): string {
  const root = fs.mkdtempSync(path.join(base, "tree-"));
  for (const f of files) {
    fs.mkdirSync(path.join(root, path.dirname(f)), { recursive: true });
    fs.writeFileSync(path.join(root, f), "");
  }
  return root;
}

/** The real file system, with an environment of our choosing and no home directory surprises. */
function ctx(env: Record<string, string>, home = "/nonexistent-home"): SearchContext {
  return { ...systemContext(), env, home };
}

/** Opens nothing but files under `root`; records what was asked. */
function opener(root: string, asked: string[]): (p: string) => LibraryHandle {
  return (p) => {
    asked.push(p);
    if (p.startsWith(root)) return {} as LibraryHandle;
    throw new Error(`cannot open ${p}`);
  };
}

test("override variable: a directory, the only place tried", () => {
  const root = tree(["custom/libnvrtc.so.12", "custom/libnvrtc.so.13", "custom/libnvrtc-builtins.so.13.0"]);
  const asked: string[] = [];
  const found = findLibrary(
    LIBRARIES.nvrtc,
    ctx({ SYMMKIT_LIBNVRTC: path.join(root, "custom") }),
    opener(root, asked),
  );
  assert.equal(found.path, path.join(root, "custom/libnvrtc.so.13"), "preferred soname first");
  assert.equal(found.via, "SYMMKIT_LIBNVRTC");
  assert.deepEqual(asked, [path.join(root, "custom/libnvrtc.so.13")]);
});

test("override variable pointing nowhere fails without searching elsewhere", () => {
  const asked: string[] = [];
  assert.throws(
    () => findLibrary(LIBRARIES.nccl, ctx({ SYMMKIT_LIBNCCL: "/does/not/exist" }), opener("/x", asked)),
    (e: unknown) =>
      e instanceof LibraryNotFoundError &&
      e.code === "SYMMKIT_LIBRARY_NOT_FOUND" &&
      e.tried.length === 1 &&
      /\/does\/not\/exist \(SYMMKIT_LIBNCCL\)/.test(e.message),
  );
  assert.deepEqual(asked, []);
});

test("LD_LIBRARY_PATH comes before the system loader and the toolkit", () => {
  const root = tree(["a/libcublasLt.so.12", "b/libcublasLt.so.13"]);
  const asked: string[] = [];
  const env = { LD_LIBRARY_PATH: `${path.join(root, "a")}:${path.join(root, "b")}` };
  const found = findLibrary(LIBRARIES.cublasLt, ctx(env), opener(root, asked));
  assert.equal(found.path, path.join(root, "a/libcublasLt.so.12"));
  assert.equal(found.via, "LD_LIBRARY_PATH");
});

test("CUDA_HOME, then Python wheels; every attempt is listed when nothing opens", () => {
  const root = tree([
    "cuda/lib64/libnvrtc.so.13",
    "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
  ]);
  const cudaHome = path.join(root, "cuda");
  const venv = path.join(root, "venv");
  const asked: string[] = [];
  const viaHome = findLibrary(
    LIBRARIES.nvrtc,
    ctx({ CUDA_HOME: cudaHome, VIRTUAL_ENV: venv }),
    opener(root, asked),
  );
  assert.equal(viaHome.path, path.join(cudaHome, "lib64/libnvrtc.so.13"));
  assert.equal(viaHome.via, "CUDA_HOME");

  const viaWheel = findLibrary(LIBRARIES.nvrtc, ctx({ VIRTUAL_ENV: venv }), opener(root, []));
  assert.equal(viaWheel.path, path.join(venv, "lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"));
  assert.equal(viaWheel.via, "python wheel");

  assert.throws(
    () => findLibrary(LIBRARIES.nvrtc, ctx({ VIRTUAL_ENV: venv }), opener("/refuse-all", [])),
    (e: unknown) => {
      assert.ok(e instanceof LibraryNotFoundError);
      assert.match(e.message, /Set SYMMKIT_LIBNVRTC/);
      assert.ok(e.tried.some((t) => t.startsWith("libnvrtc.so.13 (system loader)")));
      assert.ok(e.tried.some((t) => t.includes("/usr/local/cuda/lib64 (toolkit)")));
      assert.ok(
        e.tried.some((t) => t.includes("nvidia/cu13/lib/libnvrtc.so.13 (python wheel): cannot open")),
      );
      return true;
    },
  );
});

test("a library that fails to open is skipped for the next candidate", () => {
  const root = tree(["d/libnccl.so.2", "e/libnccl.so.2"]);
  const bad = path.join(root, "d/libnccl.so.2");
  const found = findLibrary(
    LIBRARIES.nccl,
    ctx({ LD_LIBRARY_PATH: `${path.join(root, "d")}:${path.join(root, "e")}` }),
    (p) => {
      if (p === bad || !p.startsWith(root)) throw new Error("wrong ELF class");
      return {} as LibraryHandle;
    },
  );
  assert.equal(found.path, path.join(root, "e/libnccl.so.2"));
});

test("CUDA headers: beside NVRTC first, with include/cccl when present; override; clear failure", () => {
  const root = tree([
    "tk/include/cuda_fp16.h",
    "tk/include/cuda_bf16.h",
    "tk/include/cccl/cuda/std/cstdint",
    "tk/lib64/libnvrtc.so.13",
    "other/include/cuda_fp16.h",
    "other/include/cuda_bf16.h",
  ]);
  const h = findCudaHeaders(ctx({}), path.join(root, "tk/lib64/libnvrtc.so.13"));
  assert.deepEqual(h.dirs, [path.join(root, "tk/include"), path.join(root, "tk/include/cccl")]);
  assert.equal(h.via, "beside NVRTC");
  const o = findCudaHeaders(ctx({ SYMMKIT_CUDA_INCLUDE: path.join(root, "other/include") }));
  assert.deepEqual(o.dirs, [path.join(root, "other/include")]);
  assert.throws(
    () => findCudaHeaders(ctx({ SYMMKIT_CUDA_INCLUDE: path.join(root, "nothing") })),
    (e: unknown) =>
      e instanceof SymmkitError && e.code === "SYMMKIT_HEADERS_NOT_FOUND" && e.message.includes("nothing"),
  );
});
