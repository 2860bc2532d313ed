import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  cacheDirFromEnv,
  cacheKey,
  decodeEntry,
  encodeEntry,
  KernelCache,
} from "../src/runtime/jit/cache.js";
import { includedHeaders } from "../src/runtime/jit/includes.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const base = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-cache-"));
after(() => fs.rmSync(base, { recursive: true, force: true }));
const tmp = (): string => fs.mkdtempSync(path.join(base, "cache-"));

test("the header digest changes when any (transitively) included header changes", () => {
  const dir = tmp();
  fs.mkdirSync(path.join(dir, "lib"));
  fs.writeFileSync(path.join(dir, "lib/a.cuh"), '#pragma once\n#include "b.cuh"\n');
  fs.writeFileSync(path.join(dir, "lib/b.cuh"), "#pragma once\nint b = 1;\n");
  const src = '#include "lib/a.cuh"\n#include <cuda_fp16.h>\n';
  const before = includedHeaders(src, [dir]);
  assert.deepEqual(
    before.map((h) => h.name),
    ["b.cuh", "lib/a.cuh"],
    "b.cuh is found beside a.cuh; <cuda_fp16.h> resolves nowhere here and is skipped",
  );
  const key = (): string => cacheKey({ src, headers: includedHeaders(src, [dir]) });
  const k1 = key();
  fs.writeFileSync(path.join(dir, "lib/b.cuh"), "#pragma once\nint b = 2;  \n");
  const k2 = key();
  assert.notEqual(k1, k2, "editing an indirect header changes the key");
  assert.equal(key(), k2, "same content, same key");
});

test("an include search path entry that cannot hold the header is passed over, not an error", () => {
  const dir = tmp();
  const file = path.join(dir, "not-a-dir");
  fs.writeFileSync(file, "x");
  fs.mkdirSync(path.join(dir, "inc", "sub"), { recursive: true });
  fs.writeFileSync(path.join(dir, "inc", "sub", "h.cuh"), "#pragma once\n");
  // <sub/h.cuh> under a file is ENOTDIR, not ENOENT: the search goes on to the next directory.
  const got = includedHeaders("#include <sub/h.cuh>\n", [file, path.join(dir, "inc")]);
  assert.deepEqual(
    got.map((h) => h.name),
    ["sub/h.cuh"],
  );
  // A header that appears later is seen by the next key in the same process (nothing is remembered).
  const src = '#include "late.cuh"\n';
  assert.deepEqual(includedHeaders(src, [dir]), []);
  fs.writeFileSync(path.join(dir, "late.cuh"), "int late;\n");
  assert.deepEqual(
    includedHeaders(src, [dir]).map((h) => h.name),
    ["late.cuh"],
  );
});

test("entries round-trip; damaged entries are rejected, with a warning", () => {
  const entry = { cubin: new Uint8Array([1, 2, 3, 4, 5]), lowered: { "k<float>": "_Z1kIfEvv" }, log: "" };
  const bytes = encodeEntry(entry);
  assert.deepEqual(decodeEntry(bytes), entry);
  const flipped = Buffer.from(bytes);
  flipped[flipped.length - 1] = flipped.at(-1)! ^ 1;
  assert.equal(decodeEntry(flipped), undefined);
  assert.equal(decodeEntry(bytes.subarray(0, bytes.length - 1)), undefined);
  assert.equal(decodeEntry(Buffer.from("garbage")), undefined);

  const dir = tmp();
  const cache = new KernelCache(dir);
  cache.put("k1", entry);
  assert.deepEqual(cache.get("k1"), entry);
  fs.writeFileSync(path.join(dir, "k1.kernel"), flipped);
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.message);
  process.on("warning", onWarning);
  assert.equal(cache.get("k1"), undefined);
  return new Promise<void>((resolve) =>
    setImmediate(() => {
      process.off("warning", onWarning);
      assert.ok(warnings.some((w) => w.includes("damaged kernel cache entry")));
      resolve();
    }),
  );
});

test("cache location: XDG_CACHE_HOME, an override, or off", () => {
  assert.equal(cacheDirFromEnv({ XDG_CACHE_HOME: "/x" }), "/x/symmkit/kernels");
  assert.equal(cacheDirFromEnv({ SYMMKIT_KERNEL_CACHE: "/y/k" }), "/y/k");
  assert.equal(cacheDirFromEnv({ SYMMKIT_KERNEL_CACHE: "off" }), null);
  assert.equal(new KernelCache(null).get("anything"), undefined);
});

test("eight processes writing and reading one key never see a torn entry", async () => {
  const dir = tmp();
  const cacheModule = path.join(here, "..", "src", "runtime", "jit", "cache.js");
  const script = `
    import { KernelCache } from ${JSON.stringify(cacheModule)};
    const cache = new KernelCache(${JSON.stringify(dir)});
    const cubin = new Uint8Array(256 * 1024).map((_, i) => (i * 7) & 255);
    let bad = 0, seen = 0;
    for (let i = 0; i < 40; i++) {
      cache.put("shared", { cubin, lowered: { k: "k" }, log: "" });
      const e = cache.get("shared");
      if (e) { seen++; if (e.cubin.length !== cubin.length || e.cubin[1000] !== cubin[1000]) bad++; }
    }
    process.stdout.write(JSON.stringify({ bad, seen }));
  `;
  const runs = await Promise.all(
    Array.from(
      { length: 8 },
      () =>
        new Promise<{ bad: number; seen: number }>((resolve, reject) => {
          const p = spawn(process.execPath, ["--input-type=module", "-e", script], {
            stdio: ["ignore", "pipe", "inherit"],
          });
          let out = "";
          p.stdout.on("data", (d: Buffer) => (out += d.toString()));
          p.on("exit", (code) =>
            code === 0
              ? resolve(JSON.parse(out) as { bad: number; seen: number })
              : reject(new Error(`exit ${code}`)),
          );
        }),
    ),
  );
  assert.ok(
    runs.every((r) => r.bad === 0 && r.seen === 40),
    JSON.stringify(runs),
  );
  assert.deepEqual(fs.readdirSync(dir), ["shared.kernel"], "no temporary files left behind");
});
