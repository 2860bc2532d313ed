// Where the package's own files are, from the compiled module's location (dist/src/paths.js).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** device/include: the CUDA C++ headers NVRTC compiles symmkit's kernels from. */
export const DEVICE_INCLUDE_DIR = path.join(PACKAGE_ROOT, "device", "include");

export const VERSION: string = (
  JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string }
).version;

/** The user's cache directory for symmkit's files: $XDG_CACHE_HOME/symmkit, default ~/.cache/symmkit. */
export function userCacheDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return path.join(env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "symmkit");
}
