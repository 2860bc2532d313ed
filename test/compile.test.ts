// NVRTC compiles every shipped kernel without a GPU. Runs wherever NVRTC and the CUDA headers are found
// (CI installs them, see .ci/run); elsewhere it says why it skips.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { compileCatalog, PROGRAMS } from "../src/catalog.js";
import { NvrtcError } from "../src/errors.js";
import { KernelCache } from "../src/runtime/jit/cache.js";
import { cachedProgram, compileProgram, getToolchain } from "../src/runtime/jit/compiler.js";
import { compileRequest } from "../src/runtime/module.js";
import {
  DECODE_COLS,
  decodePasses,
  decodeSharedBytes,
  describeDecodeShape,
} from "../src/ops/gemm/decode-gemm.js";
import {
  P2P_LL_BUFFER_BYTES,
  P2P_LL_CHUNK_BYTES,
  P2P_LL_ROUNDS,
  P2P_PAD_BYTES,
} from "../src/ops/exchange/programs.js";
import { P2P_LL_MAX_BLOCKS, P2P_MAX_BLOCKS } from "../src/ops/exchange/p2p.js";

function unavailable(): string | false {
  try {
    getToolchain();
    return false;
  } catch (e) {
    // The first line says what is missing; the places searched follow it (symmkit doctor lists them).
    const what = ((e as Error).message.split("\n")[0] ?? "").replace(/ Tried, in order:$/, "");
    return `NVRTC or CUDA headers not available: ${what} (bash .ci/fetch-nvrtc.sh fetches NVRTC: see the README)`;
  }
}
const skip = unavailable();

test("every shipped program compiles for sm_90a, then comes from the cache", { skip }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-nvrtc-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cache = new KernelCache(dir);
  const first = compileCatalog("sm_90a", cache);
  assert.equal(first.length, PROGRAMS.length);
  for (const r of first) {
    assert.equal(r.cacheHit, false);
    assert.ok(r.cubinBytes > 0, r.program);
  }
  const second = compileCatalog("sm_90a", cache);
  assert.ok(second.every((r) => r.cacheHit));
  const t1 = first.reduce((a, r) => a + r.ms, 0);
  const t2 = second.reduce((a, r) => a + r.ms, 0);
  console.log(`# catalog: ${t1.toFixed(0)} ms compiled, ${t2.toFixed(1)} ms from cache`);
});

test(
  "the host's shared memory and passes for every decode GEMM tile are the ring's (DecodeRing::kSharedBytes, kPasses)",
  { skip },
  () => {
    // decodeSharedBytes mirrors DecodeRing's arithmetic; a launch with less than the kernel lays out would
    // overrun its shared memory, so the compiler checks every width, one consumer, two and three (tall: up to
    // 168 rows of A), plain and with the all-reduce. decodePasses too: the host sends GEMM + all-reduce
    // through the mailbox only where the kernel transposes in one pass.
    const variants = DECODE_COLS.flatMap((cols) =>
      [1, 2, 3]
        .filter((consumers) => (consumers === 1 ? cols <= 192 : consumers === 2 || cols <= 168))
        .flatMap((consumers) =>
          [false, true].map((allReduce) => ({
            elem: "bf16" as const,
            cols,
            wide: consumers > 1,
            paired: false,
            tall: consumers === 3,
            allReduce,
          })),
        ),
    );
    const asserts = variants.flatMap((v) => {
      const ring = `symmkit::gemm::DecodeRing<${v.cols}, ${v.tall ? 3 : v.wide ? 2 : 1}, ${v.allReduce}>`;
      const what = `${describeDecodeShape(v)}${v.allReduce ? " all-reduce" : ""}`;
      return [
        `static_assert(${ring}::kSharedBytes == ${decodeSharedBytes(v)}, "${what}");`,
        `static_assert(${ring}::kPasses == ${decodePasses(v)}, "${what}: passes");`,
      ];
    });
    compileProgram(
      compileRequest(
        {
          name: "decode-ring-check",
          source: `#include "symmkit/gemm/decode_gemm.cuh"\n${asserts.join("\n")}\n__global__ void decode_ring_check() {}\n`,
          nameExpressions: ["decode_ring_check"],
        },
        "sm_90a",
      ),
      new KernelCache(null),
    );
  },
);

test("send/recv's inbox and pad constants are the kernels' (coll/p2p.cuh)", { skip }, () => {
  // The host sizes the inbox and its pad from these; a kernel reaching past either would write into
  // another allocation.
  const asserts = [
    `static_assert(symmkit::p2p::kLlChunk == ${P2P_LL_CHUNK_BYTES}, "P2P_LL_CHUNK_BYTES");`,
    `static_assert(symmkit::p2p::kLlBuffer == ${P2P_LL_BUFFER_BYTES}, "P2P_LL_BUFFER_BYTES");`,
    `static_assert(symmkit::p2p::kPadSlots * 8 == ${P2P_PAD_BYTES}, "P2P_PAD_BYTES");`,
    `static_assert(symmkit::p2p::kMaxBlocks == ${P2P_MAX_BLOCKS}, "P2P_MAX_BLOCKS");`,
    `static_assert(symmkit::p2p::kLlRounds == ${P2P_LL_ROUNDS}, "P2P_LL_ROUNDS");`,
    // ll's counters of blocks done (kLlRounds) need every block to have lines in every full chunk.
    `static_assert(${P2P_LL_MAX_BLOCKS}ull * symmkit::p2p::kThreads <= symmkit::p2p::kLlChunk / 8, "P2P_LL_MAX_BLOCKS");`,
  ];
  compileProgram(
    compileRequest(
      {
        name: "p2p-layout-check",
        source: `#include "symmkit/coll/p2p.cuh"\n${asserts.join("\n")}\n__global__ void p2p_layout_check() {}\n`,
        nameExpressions: ["p2p_layout_check"],
      },
      "sm_90a",
    ),
    new KernelCache(null),
  );
});

test(
  "cachedProgram: nothing compiled, the entry once compileProgram made it, nothing with the cache off",
  { skip },
  (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-nvrtc-"));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const cache = new KernelCache(dir);
    const req = {
      name: "cached.cu",
      source: "__global__ void k(int* x) { x[threadIdx.x] = 7; }\n",
      nameExpressions: ["k"],
      arch: "sm_90a",
    };
    assert.equal(cachedProgram(req, cache), undefined);
    assert.deepEqual(fs.readdirSync(dir), [], "a miss compiles and writes nothing");
    const built = compileProgram(req, cache);
    const hit = cachedProgram(req, cache);
    assert.ok(hit?.cacheHit);
    assert.equal(hit.key, built.key);
    assert.deepEqual(hit.cubin, built.cubin);
    assert.equal(cachedProgram(req, new KernelCache(null)), undefined);
  },
);

test("lowered names of template kernels are recorded", { skip }, () => {
  const p = compileProgram(
    {
      name: "t.cu",
      source: "template <typename T> __global__ void k(T* x) { x[threadIdx.x] = T(1); }\n",
      nameExpressions: ["k<float>", "k<int>"],
      arch: "sm_90a",
    },
    new KernelCache(null),
  );
  assert.match(p.lowered["k<float>"]!, /^_Z1kIfEvPT_$/);
  assert.match(p.lowered["k<int>"]!, /^_Z1kIiEvPT_$/);
});

test("a failed compile throws NvrtcError with the compiler's log", { skip }, () => {
  assert.throws(
    () =>
      compileProgram(
        {
          name: "broken.cu",
          source: "__global__ void k() { undeclared_thing(); }\n",
          nameExpressions: ["k"],
          arch: "sm_90a",
        },
        new KernelCache(null),
      ),
    (e: unknown) =>
      e instanceof NvrtcError &&
      e.code === "SYMMKIT_NVRTC_ERROR" &&
      /broken\.cu.*undeclared_thing/s.test(e.log),
  );
  assert.throws(
    () => compileProgram({ name: "x.cu", source: "", nameExpressions: [], arch: "90" }),
    /expected e\.g\. sm_90a/,
  );
});

test("a compile finds NVRTC's builtins after a full garbage collection", { skip }, () => {
  // koffi unloads a library whose object is collected: the builtins library NVRTC needs, preloaded when
  // NVRTC lies off the loader's path, must stay loaded for the process. A fresh process: NVRTC loaded
  // (the toolchain found), collected, then its first compile.
  const compiler = new URL("../src/runtime/jit/compiler.js", import.meta.url).href;
  const script = `
    import { compileProgram, getToolchain } from ${JSON.stringify(compiler)};
    getToolchain();
    for (let i = 0; i < 3; i++) globalThis.gc();
    const p = compileProgram({ name: "after-gc.cu", source: "__global__ void k(float* x) { x[0] = 1.0f; }\\n",
      nameExpressions: ["k"], arch: "sm_90a" }, undefined);
    console.log("cubin", p.cubin.length);`;
  const r = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, SYMMKIT_KERNEL_CACHE: "off" },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^cubin [1-9]\d*$/m);
});
