// The headers a kernel source pulls in, with a digest of each, for the compile cache key: change any
// header a kernel includes (directly or not) and the kernel is rebuilt.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

export interface HeaderDigest {
  /** As written in the #include that first reached it. */
  readonly name: string;
  readonly sha256: string;
}

const INCLUDE = /^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]/gm;

interface Scanned {
  readonly mtimeMs: number;
  readonly size: number;
  readonly sha256: string;
  readonly includes: readonly { readonly name: string; readonly quoted: boolean }[];
}

const memo = new Map<string, Scanned>();

function scanText(text: string): Scanned["includes"] {
  const out: { name: string; quoted: boolean }[] = [];
  for (const m of text.matchAll(INCLUDE)) out.push({ name: m[2]!.trim(), quoted: m[1] === '"' });
  return out;
}

function scanFile(file: string): Scanned {
  const st = fs.statSync(file);
  const hit = memo.get(file);
  if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
  const bytes = fs.readFileSync(file);
  const scanned: Scanned = {
    mtimeMs: st.mtimeMs,
    size: st.size,
    sha256: crypto.createHash("sha256").update(bytes).digest("hex"),
    includes: scanText(bytes.toString("utf8")),
  };
  memo.set(file, scanned);
  return scanned;
}

function resolve(
  name: string,
  quoted: boolean,
  fromDir: string | undefined,
  dirs: readonly string[],
): string | undefined {
  const candidates = quoted && fromDir ? [fromDir, ...dirs] : dirs;
  for (const d of candidates) {
    const p = path.join(d, name);
    try {
      // A miss reads no exception: misses were most of a cache key's cost (a header includes many system
      // headers that resolve nowhere here).
      if (fs.statSync(p, { throwIfNoEntry: false })?.isFile()) return p;
    } catch {
      // not readable here (ENOTDIR, EACCES): the next directory
    }
  }
  return undefined;
}

/**
 * Every header reachable from `source` through #include, resolved against `includeDirs` as NVRTC would
 * (quoted includes first beside the including file). Conditional compilation is ignored, so the set can
 * only be larger than what the compiler reads: a superfluous rebuild, never a stale cache hit. Includes
 * that resolve nowhere (NVRTC's builtin headers, host-only headers) are skipped.
 */
export function includedHeaders(source: string, includeDirs: readonly string[]): HeaderDigest[] {
  const seen = new Map<string, HeaderDigest>();
  const walk = (includes: Scanned["includes"], fromDir: string | undefined): void => {
    for (const inc of includes) {
      const file = resolve(inc.name, inc.quoted, fromDir, includeDirs);
      if (!file || seen.has(file)) continue;
      const s = scanFile(file);
      seen.set(file, { name: inc.name, sha256: s.sha256 });
      walk(s.includes, path.dirname(file));
    }
  };
  walk(scanText(source), undefined);
  return [...seen.values()].sort((a, b) =>
    a.name === b.name ? a.sha256.localeCompare(b.sha256) : a.name.localeCompare(b.name),
  );
}
