// init() refuses bad options with a typed error naming the option, before it joins anything.
import assert from "node:assert/strict";
import { constants as bufferConstants } from "node:buffer";
import { test } from "node:test";
import { InvalidArgumentError, UnsupportedError } from "../src/errors.js";
import { init, type InitOptions } from "../src/init.js";

/** The largest ArrayBuffer on this Node: the CPU backend's staging buffer and its signal pad share one. */
const MAX = bufferConstants.MAX_LENGTH;

test("bad init options: a typed error before anything starts", async () => {
  const cases: [InitOptions, RegExp][] = [
    [{ backend: "tpu" as "cpu" }, /backend tpu is not one of auto, cuda, cpu/],
    [{ backend: "cpu", syncTimeoutMs: Number.NaN }, /syncTimeoutMs NaN must be an integer/],
    [{ backend: "cpu", syncTimeoutMs: -1 }, /syncTimeoutMs -1 must be an integer/],
    [{ backend: "cpu", syncTimeoutMs: 1e12 }, /syncTimeoutMs 1000000000000 must be an integer/],
    [{ backend: "cpu", storeTimeoutMs: 2 ** 40 }, /storeTimeoutMs \d+ must be an integer/],
    [{ backend: "cpu", storeTimeoutMs: Number.NaN }, /storeTimeoutMs NaN must be an integer/],
    [{ backend: "cpu", stagingBytes: 0 }, /stagingBytes 0 must be a positive integer/],
    [{ backend: "cpu", acrossHosts: "yes" as unknown as boolean }, /acrossHosts yes must be true or false/],
    // The region also holds the signal pad: the largest buffer, less one byte, does not fit either.
    [{ backend: "cpu", stagingBytes: MAX - 1 }, /exceeds \d+, the CPU backend's largest staging buffer/],
    [{ backend: "cpu", stagingBytes: MAX }, /exceeds \d+, the CPU backend's largest staging buffer/],
  ];
  for (const [options, pattern] of cases) {
    await assert.rejects(
      init(options),
      (e: unknown) => e instanceof InvalidArgumentError && pattern.test(e.message),
      JSON.stringify(options),
    );
  }
});

test("acrossHosts on the CPU backend: UnsupportedError saying what it needs, before joining", async () => {
  await assert.rejects(
    init({ backend: "cpu", acrossHosts: true }),
    (e: unknown) => e instanceof UnsupportedError && /acrossHosts needs the cuda backend/.test(e.message),
  );
});

test("SYMMKIT_STAGING_BYTES too large for the CPU backend: a typed error, not a native abort", async () => {
  for (const bytes of [MAX - 1, MAX]) {
    process.env.SYMMKIT_STAGING_BYTES = String(bytes);
    try {
      await assert.rejects(
        init({ backend: "cpu" }),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.message.startsWith(`init: stagingBytes ${bytes} exceeds `) &&
          e.message.endsWith("use a smaller one"),
        String(bytes),
      );
    } finally {
      delete process.env.SYMMKIT_STAGING_BYTES;
    }
  }
});
