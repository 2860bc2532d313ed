// Where the NVIDIA libraries and CUDA headers live differs per install: the toolkit, the distribution,
// NVIDIA's Python wheels. Discovery walks a fixed order, honours one override variable per library, and
// records every place it looked so that "not found" can say exactly where it searched.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { LibraryNotFoundError, SymmkitError } from "../errors.js";
import { readEnvVar, type EnvVarName, type LibraryEnvVar } from "../settings.js";
import { koffi, type LibraryHandle } from "./native.js";

export type LibraryId = "cuda" | "nvrtc" | "nccl" | "cublasLt" | "nvml";

export interface LibrarySpec {
  readonly id: LibraryId;
  readonly display: string;
  /** Override: a library file, or a directory holding it (src/settings.ts). */
  readonly envVar: LibraryEnvVar;
  /** File names that count as this library, e.g. libnvrtc.so, libnvrtc.so.13. */
  readonly pattern: RegExp;
  /** Names handed to the system loader as they are (its cache and LD_LIBRARY_PATH), best first. */
  readonly sonames: readonly string[];
  /** Sub-directories of site-packages/nvidia/ that NVIDIA's wheels put it in. */
  readonly wheelDirs: readonly string[];
}

export const LIBRARIES: Readonly<Record<LibraryId, LibrarySpec>> = {
  cuda: {
    id: "cuda",
    display: "libcuda (NVIDIA driver)",
    envVar: "SYMMKIT_LIBCUDA",
    pattern: /^libcuda\.so(\.\d+)*$/,
    sonames: ["libcuda.so.1", "libcuda.so"],
    wheelDirs: [],
  },
  nvrtc: {
    id: "nvrtc",
    display: "libnvrtc (CUDA runtime compiler)",
    envVar: "SYMMKIT_LIBNVRTC",
    pattern: /^libnvrtc\.so(\.\d+)*$/,
    sonames: ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
    wheelDirs: ["cu13", "cuda_nvrtc"],
  },
  nccl: {
    id: "nccl",
    display: "libnccl (NCCL)",
    envVar: "SYMMKIT_LIBNCCL",
    pattern: /^libnccl\.so(\.\d+)*$/,
    sonames: ["libnccl.so.2", "libnccl.so"],
    wheelDirs: ["nccl", "cu13"],
  },
  cublasLt: {
    id: "cublasLt",
    display: "libcublasLt (cuBLASLt)",
    envVar: "SYMMKIT_LIBCUBLASLT",
    pattern: /^libcublasLt\.so(\.\d+)*$/,
    sonames: ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"],
    wheelDirs: ["cu13", "cublas"],
  },
  nvml: {
    id: "nvml",
    display: "libnvidia-ml (NVML, ships with the driver)",
    envVar: "SYMMKIT_LIBNVML",
    pattern: /^libnvidia-ml\.so(\.\d+)*$/,
    sonames: ["libnvidia-ml.so.1", "libnvidia-ml.so"],
    wheelDirs: [],
  },
};

/** The file system and environment discovery reads; tests hand in fakes. */
export interface SearchContext {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly home: string;
  isDir(p: string): boolean;
  isFile(p: string): boolean;
  readdir(p: string): string[];
}

export function systemContext(): SearchContext {
  const stat = (p: string): fs.Stats | undefined => {
    try {
      return fs.statSync(p);
    } catch {
      return undefined;
    }
  };
  return {
    env: process.env,
    home: os.homedir(),
    isDir: (p) => stat(p)?.isDirectory() ?? false,
    isFile: (p) => stat(p)?.isFile() ?? false,
    readdir: (p) => {
      try {
        return fs.readdirSync(p);
      } catch {
        return [];
      }
    },
  };
}

interface Place {
  readonly dir: string;
  readonly via: string;
}

/** One step of the search: a directory to list, or a bare name for the system loader. */
export type SearchStep =
  | { readonly kind: "dir"; readonly dir: string; readonly via: string }
  | { readonly kind: "soname"; readonly name: string; readonly via: string };

function versionKey(name: string): number[] {
  return (name.match(/\.so((\.\d+)*)$/)?.[1] ?? "").split(".").filter(Boolean).map(Number);
}

/** Library files in `dir`: the preferred sonames first, then any other version, newest first. */
function filesIn(spec: LibrarySpec, dir: string, ctx: SearchContext): string[] {
  const names = ctx.readdir(dir).filter((n) => spec.pattern.test(n) && ctx.isFile(path.join(dir, n)));
  const rank = (n: string): number => {
    const i = spec.sonames.indexOf(n);
    return i < 0 ? spec.sonames.length : i;
  };
  names.sort((a, b) => {
    const r = rank(a) - rank(b);
    if (r !== 0) return r;
    const va = versionKey(a);
    const vb = versionKey(b);
    for (let i = 0; i < Math.max(va.length, vb.length); i++) {
      const d = (vb[i] ?? -1) - (va[i] ?? -1);
      if (d !== 0) return d;
    }
    return 0;
  });
  return names.map((n) => path.join(dir, n));
}

/** Versioned directories such as /usr/local/cuda-13.0, newest first. */
function versionedDirs(parent: string, prefix: string, ctx: SearchContext): string[] {
  return ctx
    .readdir(parent)
    .filter((n) => n.startsWith(prefix))
    .sort((a, b) => b.localeCompare(a, "en", { numeric: true }))
    .map((n) => path.join(parent, n));
}

/** site-packages directories that may hold NVIDIA's wheels (nvidia/<component>/lib). */
export function sitePackagesDirs(ctx: SearchContext): string[] {
  const out: string[] = [];
  const pyLibs = (prefix: string): void => {
    const lib = path.join(prefix, "lib");
    for (const py of versionedDirs(lib, "python3", ctx)) {
      out.push(path.join(py, "site-packages"), path.join(py, "dist-packages"));
    }
  };
  for (const v of ["VIRTUAL_ENV", "CONDA_PREFIX"]) {
    const p = ctx.env[v];
    if (p) pyLibs(p);
  }
  for (const p of (ctx.env.PYTHONPATH ?? "").split(":")) if (p) out.push(p);
  pyLibs(path.join(ctx.home, ".local"));
  pyLibs("/usr/local");
  pyLibs("/usr");
  out.push("/usr/lib/python3/dist-packages");
  return [...new Set(out)];
}

function toolkitRoots(ctx: SearchContext): Place[] {
  const roots: Place[] = [];
  for (const v of ["CUDA_HOME", "CUDA_PATH"]) {
    const p = ctx.env[v];
    if (p) roots.push({ dir: p, via: v });
  }
  roots.push({ dir: "/usr/local/cuda", via: "toolkit" });
  for (const d of versionedDirs("/usr/local", "cuda-", ctx)) roots.push({ dir: d, via: "toolkit" });
  roots.push({ dir: "/opt/cuda", via: "toolkit" });
  return roots;
}

function archTriple(): string {
  return process.arch === "arm64" ? "sbsa-linux" : "x86_64-linux";
}

/** Every place discovery looks for `spec`, in order (the override variable is handled by findLibrary). */
export function searchPlaces(spec: LibrarySpec, ctx: SearchContext): SearchStep[] {
  const places: SearchStep[] = [];
  const dir = (d: string, via: string): void => void places.push({ kind: "dir", dir: d, via });
  for (const d of (ctx.env.LD_LIBRARY_PATH ?? "").split(":")) if (d) dir(d, "LD_LIBRARY_PATH");
  for (const name of spec.sonames) places.push({ kind: "soname", name, via: "system loader" });
  for (const r of toolkitRoots(ctx)) {
    for (const sub of ["lib64", "lib", `targets/${archTriple()}/lib`]) {
      dir(path.join(r.dir, sub), r.via);
    }
  }
  const multiarch = process.arch === "arm64" ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  for (const d of [
    `/usr/lib/${multiarch}`,
    "/usr/lib64",
    "/usr/lib",
    `/lib/${multiarch}`,
    "/usr/lib/wsl/lib",
  ]) {
    dir(d, "distribution");
  }
  for (const site of sitePackagesDirs(ctx)) {
    for (const w of spec.wheelDirs) dir(path.join(site, "nvidia", w, "lib"), "python wheel");
  }
  return places;
}

export interface Found {
  readonly lib: LibraryHandle;
  readonly path: string;
  readonly via: string;
}

/** Opens a library; an injectable seam so that tests can run the search without real libraries. */
export type Opener = (pathOrName: string) => LibraryHandle;

const defaultOpener: Opener = (p) => koffi.load(p);

/**
 * Finds and opens `spec`. The override variable, when set, is the only place tried: a user who points at
 * a library means that one. Otherwise each place of searchPlaces() in order; the first library that opens
 * wins. Throws LibraryNotFoundError listing every attempt.
 */
export function findLibrary(spec: LibrarySpec, ctx: SearchContext, open: Opener = defaultOpener): Found {
  const tried: string[] = [];
  const tryFile = (file: string, via: string): Found | undefined => {
    try {
      return { lib: open(file), path: file, via };
    } catch (e) {
      tried.push(`${file} (${via}): ${firstLine(e)}`);
      return undefined;
    }
  };
  const tryDir = (dir: string, via: string): Found | undefined => {
    if (!ctx.isDir(dir)) {
      tried.push(`${dir} (${via}): no such directory`);
      return undefined;
    }
    const files = filesIn(spec, dir, ctx);
    if (files.length === 0) tried.push(`${dir} (${via}): no ${spec.sonames.at(-1) ?? spec.id}* here`);
    for (const f of files) {
      const found = tryFile(f, via);
      if (found) return found;
    }
    return undefined;
  };

  const override = readEnvVar(spec.envVar, ctx.env);
  if (override) {
    const found = ctx.isDir(override)
      ? tryDir(override, spec.envVar)
      : ctx.isFile(override)
        ? tryFile(override, spec.envVar)
        : (tried.push(`${override} (${spec.envVar}): no such file or directory`), undefined);
    if (found) return found;
    throw new LibraryNotFoundError(spec.display, spec.envVar, tried);
  }

  const seen = new Set<string>();
  for (const place of searchPlaces(spec, ctx)) {
    if (place.kind === "soname") {
      try {
        const lib = open(place.name);
        return { lib, path: loadedPath(place.name) ?? place.name, via: place.via };
      } catch (e) {
        tried.push(`${place.name} (${place.via}): ${firstLine(e)}`);
      }
      continue;
    }
    if (seen.has(place.dir)) continue;
    seen.add(place.dir);
    const found = tryDir(place.dir, place.via);
    if (found) return found;
  }
  throw new LibraryNotFoundError(spec.display, spec.envVar, tried);
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split("\n")[0] ?? "";
}

/** The file the dynamic loader mapped for a library opened by bare name (Linux: /proc/self/maps). */
export function loadedPath(name: string): string | undefined {
  const stem = name.replace(/\.so.*$/, ".so");
  try {
    for (const line of fs.readFileSync("/proc/self/maps", "utf8").split("\n")) {
      const file = line.slice(line.indexOf("/"));
      if (line.includes("/") && path.basename(file).startsWith(stem)) return file;
    }
  } catch {
    // Not Linux or no procfs: the caller reports the name it opened.
  }
  return undefined;
}

const cache = new Map<LibraryId, Found>();

/** Process-wide: each library is searched for and opened once. */
export function openLibrary(id: LibraryId): Found {
  let found = cache.get(id);
  if (!found) {
    found = findLibrary(LIBRARIES[id], systemContext());
    cache.set(id, found);
  }
  return found;
}

/** The CUDA headers NVRTC needs (cuda_fp16.h, cuda_bf16.h, ...), plus include/cccl on CUDA 13. */
export interface HeaderDirs {
  readonly dirs: readonly string[];
  readonly via: string;
}

const HEADERS_ENV = "SYMMKIT_CUDA_INCLUDE" satisfies EnvVarName;

export function findCudaHeaders(ctx: SearchContext, nvrtcPath?: string): HeaderDirs {
  const places: Place[] = [];
  const override = readEnvVar(HEADERS_ENV, ctx.env);
  if (override) {
    places.push({ dir: override, via: HEADERS_ENV });
  } else {
    // Headers that match the NVRTC in use first: the toolkit or wheel it came from.
    if (nvrtcPath)
      places.push({ dir: path.join(path.dirname(nvrtcPath), "..", "include"), via: "beside NVRTC" });
    for (const r of toolkitRoots(ctx)) {
      places.push({ dir: path.join(r.dir, "include"), via: r.via });
      places.push({ dir: path.join(r.dir, "targets", archTriple(), "include"), via: r.via });
    }
    for (const site of sitePackagesDirs(ctx)) {
      for (const w of ["cu13", "cuda_runtime"]) {
        places.push({ dir: path.join(site, "nvidia", w, "include"), via: "python wheel" });
      }
    }
    places.push({ dir: "/usr/include", via: "distribution" });
  }
  const tried: string[] = [];
  for (const p of places) {
    const dir = path.normalize(p.dir);
    if (ctx.isFile(path.join(dir, "cuda_fp16.h")) && ctx.isFile(path.join(dir, "cuda_bf16.h"))) {
      const cccl = path.join(dir, "cccl");
      return { dirs: ctx.isDir(cccl) ? [dir, cccl] : [dir], via: p.via };
    }
    tried.push(`${dir} (${p.via})`);
  }
  throw new SymmkitError(
    "SYMMKIT_HEADERS_NOT_FOUND",
    `CUDA headers (cuda_fp16.h, cuda_bf16.h) not found; NVRTC needs them. Install the CUDA toolkit or ` +
      `the nvidia-cuda-runtime wheel, or set ${HEADERS_ENV} to the include directory. Tried:\n` +
      tried.map((t) => `  ${t}`).join("\n"),
  );
}
