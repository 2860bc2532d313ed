// `symmkit demo`: the main job. Today it checks the runtime end to end on the GPU (device RNG against
// the host's copy, graph replay) and, without a GPU, says so and checks what runs without one. The
// collectives join it as they land.
import { SymmkitError } from "./errors.js";
import { compileCatalog } from "./catalog.js";
import { gatherDoctorReport } from "./doctor.js";
import { Device } from "./runtime/device.js";
import { Graph } from "./runtime/graph.js";
import { hostUniform, philox4x32_10 } from "./runtime/random.js";
import { defaultStream } from "./runtime/stream.js";
import { freshSeed, Tensor } from "./runtime/tensor.js";

type Check = { name: string; ok: boolean; detail: string };

function run(name: string, f: () => string): Check {
  try {
    return { name, ok: true, detail: f() };
  } catch (e) {
    return {
      name,
      ok: false,
      detail: e instanceof Error ? e.message.split("\n").slice(0, 6).join("\n    ") : String(e),
    };
  }
}

export function demo(log: (line: string) => void = console.log): boolean {
  const report = gatherDoctorReport();
  const checks: Check[] = [];
  checks.push(
    run("host Philox4x32-10 known answer", () => {
      const w = philox4x32_10([0, 0, 0, 0], 0, 0)
        .map((x) => x.toString(16).padStart(8, "0"))
        .join(" ");
      if (w !== "6627e8d5 e169c58d bc57ac4c 9b00dbd8")
        throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `got ${w}`);
      return w;
    }),
  );
  if (report.gpus.ok) {
    const device = Device.get(0);
    log(`GPU: ${device.props.name} (${device.props.arch}), ${report.gpus.value.length} visible`);
    checks.push(run("compile shipped kernels for this GPU", () => compileSummary(device.props.arch)));
    checks.push(run("device rand == host Philox, bit for bit", () => randMatchesHost(device)));
    checks.push(run("CUDA graph: capture 100 fills, replay", () => graphReplay(device)));
  } else {
    const why = !report.driver.ok ? report.driver.error : report.gpus.ok ? "" : report.gpus.error;
    log(`No NVIDIA GPU found: ${why.split("\n")[0]}`);
    log("On a GPU machine symmkit uses libcuda (driver API), NVRTC for sm_90a kernels, NCCL and cuBLASLt.");
    if (report.nvrtc.ok)
      checks.push(run("compile shipped kernels for sm_90a (no GPU needed)", () => compileSummary("sm_90a")));
    else
      log(`NVRTC not found either, so kernels are not compiled here: ${report.nvrtc.error.split("\n")[0]}`);
  }
  for (const c of checks) log(`${c.ok ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`);
  log(
    "Collectives (all-reduce, all-gather, reduce-scatter) are not built yet: they arrive with the distributed runtime.",
  );
  return checks.every((c) => c.ok);
}

function compileSummary(arch: string): string {
  const r = compileCatalog(arch);
  return `${r.reduce((a, p) => a + p.kernels, 0)} kernels in ${r.length} program(s), ${r.every((p) => p.cacheHit) ? "from cache" : `${r.reduce((a, p) => a + p.ms, 0).toFixed(0)} ms`}`;
}

function randMatchesHost(device: Device): string {
  const seed = freshSeed();
  const n = 100003;
  using t = Tensor.rand([n], "f32", { device, seed, low: -2, high: 3 });
  const got = t.toHost() as Float32Array;
  const want = hostUniform(n, seed, 0, -2, 3);
  const bad = got.findIndex((v, i) => v !== want[i]);
  if (bad >= 0)
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `seed ${seed}: element ${bad} is ${got[bad]}, host says ${want[bad]}`,
    );
  return `${n} values, seed ${seed}`;
}

function graphReplay(device: Device): string {
  const stream = defaultStream(device);
  using t = Tensor.empty([4096], "i32", { device });
  let v = 0;
  using g = Graph.capture(stream, () => {
    for (let i = 0; i < 100; i++) t.fill(++v, stream);
  });
  t.fill(-1, stream);
  g.launch();
  const out = t.toHost() as Int32Array;
  if (!out.every((x) => x === 100))
    throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `replay left ${out[0]}`);
  return "last fill visible after replay";
}
