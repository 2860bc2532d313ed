// init() refuses bad options with a typed error naming the option, before it joins anything.
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError } from "../src/errors.js";
import { init, type InitOptions } from "../src/init.js";

test("bad init options: a typed error before anything starts", async () => {
  const cases: [InitOptions, RegExp][] = [
    [{ backend: "tpu" as "cpu" }, /backend tpu is not one of auto, cuda, cpu/],
    [{ backend: "cpu", syncTimeoutMs: Number.NaN }, /syncTimeoutMs NaN must be an integer/],
    [{ backend: "cpu", syncTimeoutMs: -1 }, /syncTimeoutMs -1 must be an integer/],
    [{ backend: "cpu", storeTimeoutMs: 2 ** 40 }, /storeTimeoutMs \d+ must be an integer/],
    [{ backend: "cpu", stagingBytes: 0 }, /stagingBytes 0 must be a positive integer/],
    [
      { backend: "cpu", stagingBytes: 4 * 2 ** 30 },
      /exceeds the CPU backend's 4294967295-byte shared buffer/,
    ],
  ];
  for (const [options, pattern] of cases) {
    await assert.rejects(
      init(options),
      (e: unknown) => e instanceof InvalidArgumentError && pattern.test(e.message),
      JSON.stringify(options),
    );
  }
});
