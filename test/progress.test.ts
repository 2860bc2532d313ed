// Benchmark progress (src/bench/progress.ts): plain lines without a TTY, exactly what the benchmarks
// printed before; on a (fake) TTY a bar with the step, elapsed time and ETA; only rank 0 prints.
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { startProgress, type ProgressStream } from "../src/bench/progress.js";

/** A stream that keeps what is written to it; a TTY of 100 columns with `tty`. */
function capture(tty: boolean): { stream: ProgressStream; text: () => string } {
  const chunks: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk: Buffer | string, _encoding, done) {
        chunks.push(chunk.toString());
        done();
      },
    }),
    tty ? { isTTY: true, columns: 100 } : {},
  );
  return { stream, text: () => chunks.join("") };
}

// Cursor movement and line clearing, which a TTY gets around the bar.
const ESC = "\u001b";
const plain = (s: string): string => s.replace(new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]|${ESC}[78]`, "g"), "");

test("progress without a TTY: a line per step and per log, as the benchmarks always printed", () => {
  const { stream, text } = capture(false);
  {
    using p = startProgress({ title: "all-reduce", total: 2, rank: 0, stream });
    p.log("seed 42");
    p.step("all-reduce 4096 bytes: validating and timing one_shot, nccl ...");
    p.step("all-reduce 16384 bytes: validating and timing one_shot, nccl ...");
  }
  assert.equal(
    text(),
    "seed 42\n" +
      "all-reduce 4096 bytes: validating and timing one_shot, nccl ...\n" +
      "all-reduce 16384 bytes: validating and timing one_shot, nccl ...\n",
  );
});

test("progress without a TTY, echoSteps false: only the loop's own lines", () => {
  const { stream, text } = capture(false);
  {
    using p = startProgress({ title: "gemm", total: 1, rank: 0, stream, echoSteps: false });
    p.step("8192x8192x8192 bf16 B nk");
    p.log("gemm 8192x8192x8192 bf16 B nk: symmkit 700 TFLOP/s, cuBLASLt 680");
  }
  assert.equal(text(), "gemm 8192x8192x8192 bf16 B nk: symmkit 700 TFLOP/s, cuBLASLt 680\n");
});

test("progress: ranks other than 0 print nothing, on a TTY or not", () => {
  for (const tty of [false, true]) {
    const { stream, text } = capture(tty);
    {
      using p = startProgress({ title: "x", total: 1, rank: 1, stream });
      p.step("step");
      p.log("line");
    }
    assert.equal(text(), "");
  }
});

test("progress on a TTY: a bar with the step, elapsed time and ETA; lines above it", async () => {
  const { stream, text } = capture(true);
  {
    using p = startProgress({ title: "all-reduce", total: 3, rank: 0, stream });
    p.log("seed 42");
    p.step("all-reduce 4096 bytes");
    await sleep(30);
    p.step("all-reduce 16384 bytes");
    p.log("  one_shot 5.3 us");
    await sleep(250); // the bar redraws at 10 frames a second
    const now = plain(text());
    assert.match(now, /all-reduce \[[^\]]+\] 1\/3 \| 0s \| ETA 0s \| all-reduce 16384 bytes/);
    assert.ok(now.indexOf("seed 42\n") < now.indexOf("  one_shot 5.3 us\n"), now);
    assert.ok(now.lastIndexOf("  one_shot 5.3 us\n") < now.lastIndexOf("1/3"), "lines go above the bar");
    p.step("all-reduce 65536 bytes");
  }
  const end = plain(text());
  assert.match(end, /all-reduce \[[^\]]+\] 3\/3 \| 0s \| ETA 0s \| all-reduce 65536 bytes\n$/);
  // Each redraw starts at column 1 (CSI 1 G): every drawn line fits the 100 columns.
  for (const line of text().split(new RegExp(`${ESC}\\[1G|\n`)))
    assert.ok(plain(line).length < 100, `within the width: ${plain(line)}`);
});

test("progress on a TTY: a benchmark inside another advances the outer bar", () => {
  const { stream, text } = capture(true);
  {
    // eslint-disable-next-line @typescript-eslint/no-unused-vars -- held for its dispose, as tune() does
    using _tune = startProgress({ title: "tune", total: 3, rank: 0, stream, echoSteps: false });
    for (const [collective, sizes] of [
      ["all-reduce", 2],
      ["all-gather", 1],
    ] as const) {
      using inner = startProgress({ title: collective, total: sizes, rank: 0, stream });
      for (let i = 0; i < sizes; i++) inner.step(`${collective} size ${i}`);
      inner.log(`${collective} done`);
    }
  }
  const out = plain(text());
  assert.doesNotMatch(out, /^all-reduce \[/m, "no second bar");
  assert.match(out, /all-reduce done\n/);
  assert.match(out, /tune \[[^\]]+\] 3\/3 \| 0s \| ETA 0s \| all-gather size 0\n$/);
  // The outer bar is gone once disposed: the next progress draws its own.
  const next = capture(true);
  startProgress({ title: "gemm", total: 1, rank: 0, stream: next.stream })[Symbol.dispose]();
  assert.match(plain(next.text()), /^gemm \[/);
});
