import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CudaError,
  DisposedError,
  InvalidArgumentError,
  LibraryNotFoundError,
  NvrtcError,
  OutOfMemoryError,
  SymmkitError,
} from "../src/errors.js";
import { HostTensor } from "../src/cpu/host-tensor.js";
import { init, type InitOptions } from "../src/init.js";
import { Tensor } from "../src/runtime/tensor.js";

test("errors carry stable codes, their class name and a message that says what to do", () => {
  const c = new CudaError("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory");
  assert.equal(c.code, "SYMMKIT_CUDA_ERROR");
  assert.equal(c.name, "CudaError");
  assert.equal(c.errorName, "CUDA_ERROR_OUT_OF_MEMORY");
  assert.equal(c.message, "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  assert.ok(c instanceof SymmkitError && c instanceof Error);

  const n = new NvrtcError(
    "nvrtcCompileProgram(x.cu, sm_90a)",
    6,
    "NVRTC_ERROR_COMPILATION",
    "x.cu(3): error: boom",
  );
  assert.equal(n.code, "SYMMKIT_NVRTC_ERROR");
  assert.match(n.message, /NVRTC_ERROR_COMPILATION \(6\)\nx\.cu\(3\): error: boom/);

  const l = new LibraryNotFoundError("libnccl", "SYMMKIT_LIBNCCL", [
    "/a (toolkit): no such directory",
    "libnccl.so.2 (system loader): nope",
  ]);
  assert.equal(l.code, "SYMMKIT_LIBRARY_NOT_FOUND");
  assert.match(l.message, /Set SYMMKIT_LIBNCCL .*\n {2}\/a \(toolkit\)/);

  assert.equal(new InvalidArgumentError("x").code, "SYMMKIT_INVALID_ARGUMENT");
  assert.match(new DisposedError("Tensor").message, /already disposed/);
});

test("CPU backend: a disposed symmetric tensor's data is a DisposedError, never a crash", async () => {
  const group = await init({ backend: "cpu", stagingBytes: 4096 });
  try {
    const s = await group.symmetric.empty([1 << 16], "f32");
    const t = s.tensor;
    const kept = t.raw as Float32Array; // a view JavaScript cannot take back
    const slice = t.slice(0, 8);
    kept.fill(3);
    await s.dispose();
    const disposed = (e: unknown): boolean => e instanceof DisposedError && e.code === "SYMMKIT_DISPOSED";
    assert.throws(() => t.raw, disposed);
    assert.throws(() => t.toHost(), disposed);
    assert.throws(() => slice.raw, disposed);
    assert.throws(() => t.view([2, 1 << 15]), disposed);
    assert.throws(() => s.peer(0), disposed);
    // The memory is gone, its address still readable: zeros, and writes land nowhere else.
    assert.equal(kept[0], 0);
    kept[kept.length - 1] = 1;
  } finally {
    await group.destroy();
  }
});

test("CPU backend: null or undefined for a collective's tensor is an InvalidArgumentError", async () => {
  const group = await init({ backend: "cpu", stagingBytes: 4096 });
  try {
    const c = group.collectives;
    const x = HostTensor.zeros([4], "f32");
    const calls: [string, () => unknown][] = [];
    for (const bad of [null, undefined] as unknown as HostTensor[]) {
      calls.push(
        ["allReduce", () => c.allReduce(bad)],
        ["allGather", () => c.allGather(bad, x)],
        ["allGather", () => c.allGather(x, bad)],
        ["reduceScatter", () => c.reduceScatter(bad, x)],
        ["reduceScatter", () => c.reduceScatter(x, bad)],
      );
    }
    for (const [what, call] of calls) {
      assert.throws(
        call,
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          new RegExp(`^${what}: \\w+ must be a tensor, got`).test(e.message),
        what,
      );
    }
  } finally {
    await group.destroy();
  }
});

/** The typed error `cls` with `code`, whose message matches `pattern`. */
const typed =
  (cls: new (...a: never[]) => SymmkitError, code: string, pattern: RegExp) =>
  (e: unknown): boolean =>
    e instanceof cls && e.code === code && pattern.test(e.message);

// Tensor's checks run before it touches a GPU, so both backends' constructors are tried here.
const BOTH = [
  ["HostTensor", HostTensor],
  ["Tensor", Tensor],
] as const;

test("fromHost without a dtype: InvalidArgumentError saying to name one (both tensor kinds)", () => {
  for (const [name, T] of BOTH)
    assert.throws(
      () => (T.fromHost as (d: unknown) => unknown)([1, 2]),
      typed(
        InvalidArgumentError,
        "SYMMKIT_INVALID_ARGUMENT",
        /^\w+\.fromHost: no dtype: name it after the data, e\.g\. .*"f32".*one of f32, f16, bf16/,
      ),
      name,
    );
});

test("fromHost of null or a string: InvalidArgumentError naming what it takes (both tensor kinds)", () => {
  for (const [name, T] of BOTH)
    for (const [data, got] of [
      [null, "null"],
      ["abc", "string"],
      [undefined, "undefined"],
    ] as const)
      assert.throws(
        () => T.fromHost(data as unknown as number[], "f32"),
        typed(
          InvalidArgumentError,
          "SYMMKIT_INVALID_ARGUMENT",
          new RegExp(
            `^${name}\\.fromHost: data must be an array of numbers \\(or bigints\\) or a typed array, got ${got}$`,
          ),
        ),
        `${name} ${got}`,
      );
});

test("a seed or offset that is not a 64-bit count: InvalidArgumentError (rand and randn, both kinds)", () => {
  const bad: [string, unknown, string][] = [
    ["seed", "abc", '"abc"'],
    ["seed", 1.5, "1.5"],
    ["seed", -1, "-1"],
    ["seed", 1n << 64n, String(1n << 64n)],
    ["offset", "7", '"7"'],
  ];
  for (const [name, T] of BOTH)
    for (const fill of ["rand", "randn"] as const)
      for (const [option, value, shown] of bad)
        assert.throws(
          () => T[fill]([4], "f32", { [option]: value }),
          typed(
            InvalidArgumentError,
            "SYMMKIT_INVALID_ARGUMENT",
            new RegExp(
              `^${fill}: ${option} ${shown.replace(/[.]/g, "\\.")} must be a bigint or an integer in \\[0, 2\\^64\\)`,
            ),
          ),
          `${name}.${fill} ${option} ${shown}`,
        );
  // Numbers and bigints in range are seeds.
  assert.deepEqual(
    HostTensor.rand([4], "u32", { seed: 7 }).toHost(),
    HostTensor.rand([4], "u32", { seed: 7n }).toHost(),
  );
});

test("a host tensor too large to allocate: OutOfMemoryError naming its shape, dtype and size", () => {
  assert.throws(
    () => HostTensor.empty([2 ** 40], "f32"),
    typed(
      OutOfMemoryError,
      "SYMMKIT_OUT_OF_MEMORY",
      // Past Node's largest buffer (4 GiB on Node 20), or past what the process can have (newer Node).
      /^HostTensor\.empty: \[1099511627776\] f32 needs 4 TiB, more than (the largest host buffer Node allows \(.+\)|this process could allocate): make a smaller tensor, or split it$/,
    ),
  );
  assert.throws(
    () => HostTensor.zeros([2 ** 30, 2 ** 30, 2 ** 10], "u8"),
    InvalidArgumentError,
    "too many elements",
  );
});

test("toHost({ dtype }) of a tensor holding another dtype: InvalidArgumentError naming both", () => {
  const t = HostTensor.zeros([2], "bf16");
  assert.deepEqual(t.toHost({ dtype: "bf16" }), new Uint16Array(2));
  assert.throws(
    () => (t as HostTensor).toHost({ dtype: "f32" }),
    typed(
      InvalidArgumentError,
      "SYMMKIT_INVALID_ARGUMENT",
      /^toHost: the tensor holds bf16, not f32: ask for bf16/,
    ),
  );
});

test("unknown init options are refused, naming them and the options init knows", async () => {
  await assert.rejects(
    init({ backend: "cpu", stagingByte: 4096 } as InitOptions),
    typed(
      InvalidArgumentError,
      "SYMMKIT_INVALID_ARGUMENT",
      /^init: unknown option stagingByte: the options are backend, storeTimeoutMs, syncTimeoutMs, stagingBytes, mailboxSlotBytes, acrossHosts$/,
    ),
  );
  await assert.rejects(
    init({ device: 0, rank: 1 } as InitOptions),
    /^InvalidArgumentError: init: unknown options device, rank: /,
  );
  await assert.rejects(
    init("cpu" as InitOptions),
    /init: options must be an object, e\.g\. init\(\{ backend: "cpu" \}\), got string/,
  );
});

test("a destroyed group: barrier, newGroup, symmetric.empty and collectives are DisposedErrors saying so", async () => {
  const group = await init({ backend: "cpu", stagingBytes: 4096 });
  const sub = await group.newGroup([0]);
  await sub!.destroy();
  await assert.rejects(
    sub!.barrier(),
    typed(
      DisposedError,
      "SYMMKIT_DISPOSED",
      /^process group world\/g0\.1 was already disposed; it was destroyed \(destroy\(\)\)/,
    ),
  );
  await group.destroy();
  const destroyed = typed(
    DisposedError,
    "SYMMKIT_DISPOSED",
    /^process group world was already disposed; it was destroyed \(destroy\(\)\): make a new one with init\(\)/,
  );
  await assert.rejects(group.barrier(), destroyed);
  await assert.rejects(group.newGroup([0]), destroyed);
  await assert.rejects(group.symmetric.empty([4], "f32"), destroyed);
  assert.throws(() => group.collectives, destroyed);
  await group.destroy(); // a second destroy does nothing
});

test("collectives kept from a destroyed group: the error names the group's collectives, not an internal tensor", async () => {
  const group = await init({ backend: "cpu" });
  const c = group.collectives;
  await group.destroy();
  const x = HostTensor.zeros([4], "f32");
  for (const call of [() => c.allReduce(x), () => c.allGather(x, HostTensor.zeros([4], "f32"))])
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof DisposedError, String(e));
      assert.equal(e.code, "SYMMKIT_DISPOSED");
      assert.match(
        e.message,
        /^the memory of process group world's collectives was already disposed; the group was destroyed \(destroy\(\)\), and collectives kept from it cannot be used: make a new group with init\(\)/,
      );
      assert.doesNotMatch(e.message, /8388608|symmetric tensor|u8/);
      return true;
    });
});
