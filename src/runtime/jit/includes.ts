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

/** Where each include resolved, by (quoted, including directory, search path, name): resolving stats
 * every candidate directory in turn, most of them misses, which was most of a cache key's cost. Kept for
 * the process (a resolved header that disappears is resolved again; one that appears later earlier in the
 * search path is seen by the next process). */
const resolved = new Map<string, string | undefined>();

function resolve(
  name: string,
  quoted: boolean,
  fromDir: string | undefined,
  dirs: readonly string[],
  dirsKey: string,
): string | undefined {
  const key = `${quoted && fromDir ? fromDir : ""}\u0000${dirsKey}\u0000${name}`;
  const known = resolved.get(key);
  if (known !== undefined ? fs.existsSync(known) : resolved.has(key)) return known;
  const candidates = quoted && fromDir ? [fromDir, ...dirs] : dirs;
  // A miss reads no exception: they were most of the cost (a header includes many system headers that
  // resolve nowhere here).
  const found = candidates
    .map((d) => path.join(d, name))
    .find((p) => fs.statSync(p, { throwIfNoEntry: false })?.isFile());
  resolved.set(key, found);
  return found;
}

/**
 * Every header reachable from `source` through #include, resolved against `includeDirs` as NVRTC would
 * (quoted includes first beside the including file). Conditional compilation is ignored, so the set can
 * only be larger than what the compiler reads: a superfluous rebuild, never a stale cache hit (but for a
 * header that appears mid-process where an include resolved elsewhere or nowhere: see `resolved`). Includes
 * that resolve nowhere (NVRTC's builtin headers, host-only headers) are skipped.
 */
export function includedHeaders(source: string, includeDirs: readonly string[]): HeaderDigest[] {
  const seen = new Map<string, HeaderDigest>();
  const dirsKey = includeDirs.join("\u0000");
  const walk = (includes: Scanned["includes"], fromDir: string | undefined): void => {
    for (const inc of includes) {
      const file = resolve(inc.name, inc.quoted, fromDir, includeDirs, dirsKey);
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
