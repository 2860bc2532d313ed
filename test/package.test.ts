// The package as a user gets it: `npm pack` from a copy of the checkout's sources (what git tracks or
// would: no dist/, so prepack builds it, as in a fresh clone), the tarball installed into an empty
// project with its dependencies from the registry, then `npx symmkit demo` and a shipped example there.
// Packing a copy keeps the build away from this checkout's dist/, which the other test files are running
// from.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const npmMissing =
  spawnSync("npm", ["--version"], { encoding: "utf8" }).status === 0 ? false : "npm is not on PATH";

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "symmkit-pack-"));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function npm(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)("npm", [...args, "--no-audit", "--no-fund"], {
    cwd,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  return stdout;
}

test(
  "npm pack, npm install the tarball, npx symmkit demo",
  { skip: npmMissing, timeout: 120_000 },
  async () => {
    const src = path.join(tmp, "src");
    const sources = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: root,
      encoding: "utf8",
    });
    assert.equal(sources.status, 0, `git ls-files: ${sources.stderr}`);
    for (const f of sources.stdout.split("\0").filter((f) => f && fs.existsSync(path.join(root, f))))
      fs.cpSync(path.join(root, f), path.join(src, f), { recursive: true });
    fs.symlinkSync(path.join(root, "node_modules"), path.join(src, "node_modules")); // tsc for prepack
    const [packed] = JSON.parse(await npm(src, "pack", "--json", "--pack-destination", tmp)) as {
      filename: string;
      files: { path: string }[];
    }[];
    assert.ok(packed);
    const files = packed.files.map((f) => f.path);
    for (const f of ["package.json", "LICENSE", "README.md", "dist/src/cli.js", "dist/src/index.d.ts"])
      assert.ok(files.includes(f), `${f} is not in the package`);
    for (const dir of ["device/include/symmkit/", "tune/", "examples/", "dist/examples/"])
      assert.ok(
        files.some((f) => f.startsWith(dir)),
        `${dir} is not in the package`,
      );
    const examples = fs.readdirSync(path.join(root, "examples")).filter((f) => f.endsWith(".ts"));
    for (const e of examples)
      for (const f of [`examples/${e}`, `dist/examples/${e.replace(/\.ts$/, ".js")}`])
        assert.ok(files.includes(f), `${f} is not in the package`);
    const extra = files.filter(
      (f) =>
        !/^(dist\/src|dist\/examples|examples|device\/include|tune)\/|^(package\.json|LICENSE|README\.md)$/.test(
          f,
        ),
    );
    assert.deepEqual(extra, [], "only what runs and the examples, no tests");

    const app = path.join(tmp, "app");
    fs.mkdirSync(app);
    await npm(app, "init", "-y");
    await npm(app, "install", "--prefer-offline", path.join(tmp, packed.filename));
    const demo = spawnSync("npx", ["--no-install", "symmkit", "demo"], {
      cwd: app,
      encoding: "utf8",
      timeout: 60_000,
    });
    const what = `exit ${demo.status}\nstdout:\n${demo.stdout}\nstderr:\n${demo.stderr}`;
    assert.equal(demo.status, 0, what);
    assert.match(demo.stdout, /^symmkit demo: /, what);
    assert.match(demo.stdout, /\[rank 0\] +collective +algorithm +bytes +us/, what);
    assert.match(demo.stdout, /\[rank 0\] demo: every result matched its reference/, what);

    // A shipped example, as README says to run one from the installed package.
    const example = spawnSync(
      "npx",
      ["--no-install", "symmkit", "run", "-n", "2", "node_modules/symmkit/dist/examples/decode.js"],
      { cwd: app, encoding: "utf8", timeout: 60_000 },
    );
    const said = `exit ${example.status}\nstdout:\n${example.stdout}\nstderr:\n${example.stderr}`;
    assert.equal(example.status, 0, said);
    assert.match(example.stdout, /\[rank 1\] rank 1: decode step .* the same bits as GEMM/, said);
  },
);
