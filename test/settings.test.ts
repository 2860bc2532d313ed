// src/settings.ts: every SYMMKIT_* variable the sources name is in its table (and in README's), every one
// parses its example and falls back to its default, and a bad value is a typed error saying what to do.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { SymmkitError } from "../src/errors.js";
import { PACKAGE_ROOT } from "../src/paths.js";
import {
  checkEnvVars,
  DEFAULT_STORE_TIMEOUT_MS,
  DEFAULT_SYNC_TIMEOUT_MS,
  ENV_VARS,
  isEnvVarName,
  readEnvVar,
  type EnvVarName,
} from "../src/settings.js";
import { cacheDirFromEnv } from "../src/runtime/jit/cache.js";
import { userTuneDir } from "../src/ops/tune-table.js";
import { readDistEnv, stagingBytesFromEnv } from "../src/distributed/env.js";
import { syncTimeoutFromEnv } from "../src/distributed/sync-watch.js";

const NAMES = Object.keys(ENV_VARS) as EnvVarName[];
const NAME = /SYMMKIT_[A-Z0-9_]+/g;

/** Every .ts file under `dir`, as [path relative to the package, text]. */
function sources(dir: string): [string, string][] {
  const out: [string, string][] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) out.push([path.relative(PACKAGE_ROOT, p), fs.readFileSync(p, "utf8")]);
    }
  };
  walk(path.join(PACKAGE_ROOT, dir));
  return out;
}

const SRC = sources("src");
const TESTS = sources("test").filter(([file]) => file !== path.join("test", "settings.test.ts"));
/** The error codes (ErrorCode in src/errors.ts): SYMMKIT_* names that are not variables. */
const ERROR_CODES = new Set(
  fs.readFileSync(path.join(PACKAGE_ROOT, "src", "errors.ts"), "utf8").match(/"SYMMKIT_[A-Z0-9_]+"/g),
);
const isErrorCode = (name: string): boolean => ERROR_CODES.has(`"${name}"`);

/** A typed environment error naming the variable, its value, what it takes and how to fix it. */
function environmentError(name: string, value: string) {
  return (e: unknown): boolean =>
    e instanceof SymmkitError &&
    e.code === "SYMMKIT_ENVIRONMENT" &&
    e.message.startsWith(`${name}=${JSON.stringify(value)} is not valid: expected `) &&
    e.message.includes(`(e.g. ${name}=`) &&
    e.message.includes("or unset it for the default");
}

test("every SYMMKIT_* variable named in src/ and test/ is in the table", () => {
  assert.ok(ERROR_CODES.size > 10, "the error codes were not found in src/errors.ts");
  const missing: string[] = [];
  for (const [file, text] of [...SRC, ...TESTS]) {
    for (const name of text.match(NAME) ?? []) {
      if (!isErrorCode(name) && !isEnvVarName(name)) missing.push(`${file}: ${name}`);
    }
  }
  assert.deepEqual(missing, [], "add these to ENV_VARS in src/settings.ts (or ErrorCode, if codes)");
  for (const name of NAMES) {
    assert.match(name, /^SYMMKIT_[A-Z0-9_]+$/);
    assert.ok(!isErrorCode(name), `${name} is both a variable and an error code`);
  }
});

test("src/ reads SYMMKIT_* variables only through src/settings.ts, by literal name", () => {
  const offenders: string[] = [];
  for (const [file, text] of SRC) {
    if (file === path.join("src", "settings.ts")) continue;
    // A name built from pieces ("SYMMKIT_" + x, `SYMMKIT_${x}`) escapes the check above.
    if (/SYMMKIT_(?![A-Z0-9*])/.test(text)) offenders.push(`${file}: a SYMMKIT_ name built from pieces`);
    const read = /\benv\s*(?:\.\s*|\[\s*["'`])(SYMMKIT_[A-Z0-9_]+)/.exec(text);
    if (read) offenders.push(`${file}: reads ${read[1]} itself; use readEnvVar("${read[1]}", env)`);
  }
  assert.deepEqual(offenders, []);
});

test("README lists every variable of the table, and no other", () => {
  const readme = fs.readFileSync(path.join(PACKAGE_ROOT, "README.md"), "utf8");
  for (const name of NAMES) assert.ok(readme.includes(`\`${name}\``), `README.md does not list ${name}`);
  for (const name of readme.match(NAME) ?? [])
    assert.ok(isErrorCode(name) || isEnvVarName(name), `README.md names ${name}, which is not in the table`);
});

test("every record says what it means and its default, and parses its example", () => {
  for (const name of NAMES) {
    const v = ENV_VARS[name];
    for (const field of ["meaning", "default", "expected", "example"] as const) {
      assert.ok(v[field].length > 0 && !v[field].includes("\n"), `${name}.${field}: one line`);
    }
    assert.doesNotThrow(() => readEnvVar(name, { [name]: v.example }), name);
  }
});

test("unset or empty: the default", () => {
  const env = { XDG_CACHE_HOME: "/c" };
  const defaults: { [N in EnvVarName]: unknown } = {
    SYMMKIT_LIBCUDA: undefined,
    SYMMKIT_LIBNVRTC: undefined,
    SYMMKIT_LIBNCCL: undefined,
    SYMMKIT_LIBCUBLASLT: undefined,
    SYMMKIT_LIBNVML: undefined,
    SYMMKIT_CUDA_INCLUDE: undefined,
    SYMMKIT_KERNEL_CACHE: "/c/symmkit/kernels",
    SYMMKIT_TUNE_DIR: "/c/symmkit/tune",
    SYMMKIT_SYNC_TIMEOUT_MS: 30_000,
    SYMMKIT_STORE_TIMEOUT_MS: 300_000,
    SYMMKIT_STAGING_BYTES: undefined,
    SYMMKIT_JOB_TOKEN: undefined,
    SYMMKIT_LAUNCHER_PID: undefined,
    SYMMKIT_FD_DIR: undefined,
    SYMMKIT_SHARE_GPUS: false,
    SYMMKIT_STORE_HOST: "127.0.0.1",
    SYMMKIT_GIT_REVISION: undefined,
    SYMMKIT_CHECK_CALLS: false,
    SYMMKIT_DEBUG: false,
    SYMMKIT_TEST_SEED: undefined,
    SYMMKIT_TEST_LARGE_MAX: 2 ** 30,
  };
  for (const name of NAMES) {
    assert.deepEqual(readEnvVar(name, env), defaults[name], name);
    assert.deepEqual(readEnvVar(name, { ...env, [name]: "" }), defaults[name], `${name}=""`);
  }
  assert.equal(DEFAULT_SYNC_TIMEOUT_MS, 30_000);
  assert.equal(ENV_VARS.SYMMKIT_SYNC_TIMEOUT_MS.default, "30000");
  assert.equal(ENV_VARS.SYMMKIT_STORE_TIMEOUT_MS.default, String(DEFAULT_STORE_TIMEOUT_MS));
  assert.equal(ENV_VARS.SYMMKIT_TEST_LARGE_MAX.default, "1 GiB");
});

test("the staging default says what the backends' constants are", async () => {
  const { DEFAULT_GPU_STAGING_BYTES } = await import("../src/init.js");
  const { DEFAULT_CPU_STAGING_BYTES } = await import("../src/cpu/process-group.js");
  const said = ENV_VARS.SYMMKIT_STAGING_BYTES.default;
  assert.ok(said.includes(`${DEFAULT_GPU_STAGING_BYTES / 2 ** 20} MiB on GPUs`), said);
  assert.ok(said.includes(`${DEFAULT_CPU_STAGING_BYTES / 2 ** 20} MiB on the CPU backend`), said);
});

test("set values, parsed", () => {
  const read = <N extends EnvVarName>(name: N, value: string) => readEnvVar(name, { [name]: value });
  assert.equal(read("SYMMKIT_LIBNCCL", "/opt/nccl/lib"), "/opt/nccl/lib");
  assert.equal(read("SYMMKIT_KERNEL_CACHE", "/y/k"), "/y/k");
  assert.equal(read("SYMMKIT_KERNEL_CACHE", "rel"), path.resolve("rel"));
  for (const off of ["off", "OFF", "0", "false", "no"]) assert.equal(read("SYMMKIT_KERNEL_CACHE", off), null);
  assert.equal(read("SYMMKIT_TUNE_DIR", "/x/y"), "/x/y");
  assert.equal(read("SYMMKIT_SYNC_TIMEOUT_MS", "3000"), 3000);
  assert.equal(read("SYMMKIT_SYNC_TIMEOUT_MS", String(2 ** 31 - 1)), 2 ** 31 - 1);
  assert.equal(read("SYMMKIT_STORE_TIMEOUT_MS", "1500"), 1500);
  assert.equal(read("SYMMKIT_STAGING_BYTES", "4096"), 4096);
  assert.equal(read("SYMMKIT_JOB_TOKEN", "secret"), "secret");
  assert.equal(read("SYMMKIT_LAUNCHER_PID", "4242"), 4242);
  assert.equal(read("SYMMKIT_STORE_HOST", "0.0.0.0"), "0.0.0.0");
  for (const on of ["1", "true", "on", "ON"]) assert.equal(read("SYMMKIT_DEBUG", on), true, on);
  for (const off of ["0", "false", "off", "False"]) assert.equal(read("SYMMKIT_DEBUG", off), false, off);
  assert.equal(read("SYMMKIT_TEST_SEED", "18446744073709551615"), 2n ** 64n - 1n);
  assert.equal(read("SYMMKIT_TEST_SEED", "0"), 0n);
  assert.equal(read("SYMMKIT_TEST_LARGE_MAX", "1048576"), 1 << 20);
});

test("a bad value is a SymmkitError SYMMKIT_ENVIRONMENT saying what it takes", () => {
  const bad: [EnvVarName, string][] = [
    ["SYMMKIT_SYNC_TIMEOUT_MS", "abc"],
    ["SYMMKIT_SYNC_TIMEOUT_MS", "0"],
    ["SYMMKIT_SYNC_TIMEOUT_MS", "-5"],
    ["SYMMKIT_SYNC_TIMEOUT_MS", "1.5"],
    ["SYMMKIT_SYNC_TIMEOUT_MS", String(2 ** 31)],
    ["SYMMKIT_STORE_TIMEOUT_MS", "0"],
    ["SYMMKIT_STORE_TIMEOUT_MS", "5m"],
    ["SYMMKIT_STORE_TIMEOUT_MS", String(2 ** 31)],
    ["SYMMKIT_STAGING_BYTES", "0"],
    ["SYMMKIT_STAGING_BYTES", "64M"],
    ["SYMMKIT_STAGING_BYTES", String(2 ** 60)],
    ["SYMMKIT_LAUNCHER_PID", "launcher"],
    ["SYMMKIT_LAUNCHER_PID", "0"],
    ["SYMMKIT_DEBUG", "yes"],
    ["SYMMKIT_DEBUG", "2"],
    ["SYMMKIT_TEST_SEED", "seed"],
    ["SYMMKIT_TEST_SEED", "-1"],
    ["SYMMKIT_TEST_SEED", String(2n ** 64n)],
    ["SYMMKIT_TEST_LARGE_MAX", "1G"],
  ];
  for (const [name, value] of bad) {
    assert.throws(
      () => readEnvVar(name, { [name]: value }),
      environmentError(name, value),
      `${name}=${value}`,
    );
  }
  // The job token is a secret: never repeated, even when refused.
  assert.throws(
    () => readEnvVar("SYMMKIT_JOB_TOKEN", { SYMMKIT_JOB_TOKEN: "x".repeat(1025) }),
    (e: unknown) =>
      e instanceof SymmkitError &&
      e.code === "SYMMKIT_ENVIRONMENT" &&
      e.message.startsWith("SYMMKIT_JOB_TOKEN=<1025 bytes, not shown> is not valid: expected ") &&
      !e.message.includes("xxx"),
  );
  assert.throws(
    () => readEnvVar("SYMMKIT_SYNC_TIMEOUT_MS", { SYMMKIT_SYNC_TIMEOUT_MS: "soon" }),
    /SYMMKIT_SYNC_TIMEOUT_MS="soon" is not valid: expected a whole number of milliseconds from 1 to 2147483647\. Set it to one \(e\.g\. SYMMKIT_SYNC_TIMEOUT_MS=60000\), or unset it for the default \(30000\)\./,
  );
});

test("the functions over the table read it", () => {
  assert.equal(syncTimeoutFromEnv({}), 30_000);
  assert.equal(syncTimeoutFromEnv({ SYMMKIT_SYNC_TIMEOUT_MS: "1000" }), 1000);
  assert.throws(
    () => syncTimeoutFromEnv({ SYMMKIT_SYNC_TIMEOUT_MS: "x" }),
    environmentError("SYMMKIT_SYNC_TIMEOUT_MS", "x"),
  );
  assert.equal(stagingBytesFromEnv({}), undefined);
  assert.equal(stagingBytesFromEnv({ SYMMKIT_STAGING_BYTES: "8192" }), 8192);
  assert.throws(
    () => stagingBytesFromEnv({ SYMMKIT_STAGING_BYTES: "-1" }),
    environmentError("SYMMKIT_STAGING_BYTES", "-1"),
  );
  assert.equal(userTuneDir({ SYMMKIT_TUNE_DIR: "/t" }), "/t");
  assert.equal(cacheDirFromEnv({ SYMMKIT_KERNEL_CACHE: "no" }), null);
  const rank = { WORLD_SIZE: "2", RANK: "1", LOCAL_WORLD_SIZE: "2", LOCAL_RANK: "1", MASTER_PORT: "29500" };
  const d = readDistEnv({ ...rank, SYMMKIT_JOB_TOKEN: "t", SYMMKIT_LAUNCHER_PID: "77" });
  assert.equal(d.token, "t");
  assert.equal(d.launcherPid, 77);
  assert.equal(readDistEnv({ ...rank, SYMMKIT_JOB_TOKEN: "" }).token, undefined);
  assert.throws(
    () => readDistEnv({ SYMMKIT_LAUNCHER_PID: "abc" }),
    environmentError("SYMMKIT_LAUNCHER_PID", "abc"),
  );
});

test("checkEnvVars (symmkit doctor) flags bad values and names symmkit does not read", () => {
  const found = checkEnvVars({
    SYMMKIT_SYNC_TIMEOUT_MS: "30s",
    SYMMKIT_STAGING_BYTES: "4096",
    SYMMKIT_SYNC_TIMEOUT: "1000",
    SYMMKIT_FD_DIR: "",
    SYMMKIT_JOB_TOKEN: "hush",
    PATH: "/bin",
  });
  assert.deepEqual(
    found.map((f) => [f.name, f.problem === undefined ? f.value : f.problem.split(" ")[0]]),
    [
      ["SYMMKIT_JOB_TOKEN", "<4 bytes, not shown>"],
      ["SYMMKIT_STAGING_BYTES", '"4096"'],
      ["SYMMKIT_SYNC_TIMEOUT", "symmkit"],
      ["SYMMKIT_SYNC_TIMEOUT_MS", 'SYMMKIT_SYNC_TIMEOUT_MS="30s"'],
    ],
  );
});
