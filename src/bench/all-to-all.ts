// `symmkit run -n N -- symmkit bench all-to-all`: allToAll of `bytes` per rank (u8), symmkit's algorithms
// beside NCCL as a framework calls it (one NCCL group of matched sends and receives, as PyTorch's
// all_to_all_single does, without symmkit's fingerprint barrier). Every implementation is validated first
// (bit for bit the same output as the raw NCCL one), then timed as GPU time from CUDA-graph replays
// (median), every rank starting each replay together.
import { SymmkitError } from "../errors.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { GPU_ALL_TO_ALL_ALGORITHMS, type GpuAllToAllAlgorithm } from "../ops/exchange/checks.js";
import { deviceCount } from "../runtime/device.js";
import { copyDeviceToDevice } from "../runtime/memory.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { perGraphFor, timeTogether } from "./collectives.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, table, type BenchEnvironment } from "./report.js";

/** The algorithms that read a symmetric x in place, timed so as `<name>_symmetric`. */
const READ_IN_PLACE = ["pull", "copy_engine"] as const;
/** What the benchmark times: allToAll's algorithms on a plain x, `pull_symmetric` and
 * `copy_engine_symmetric` (reading a symmetric x in place, with no copy in), and `nccl_raw`. */
export const ALL_TO_ALL_BENCH_NAMES = [
  ...GPU_ALL_TO_ALL_ALGORITHMS.filter((a) => a !== "auto"),
  ...READ_IN_PLACE.map((a) => `${a}_symmetric` as const),
  "nccl_raw",
] as const;

export interface AllToAllRow {
  /** Bytes of x per rank (world chunks). */
  readonly bytes: number;
  /** GPU us per call, by implementation. */
  readonly us: Readonly<Record<string, number>>;
}

export interface AllToAllBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: "all-to-all";
  readonly seed: string;
  /** Each rank's staging buffer (pull stages x whole; copy_engine a piece of each chunk per round). */
  readonly stagingBytes: number;
  readonly rows: readonly AllToAllRow[];
}

export async function benchAllToAll(o: {
  sizes: readonly number[];
  algorithms?: readonly string[] | undefined;
  staging?: number | undefined;
}): Promise<AllToAllBenchResult | undefined> {
  const staging = o.staging ?? Math.max(1 << 20, ...o.sizes);
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) => GpuCollectives.create(g, staging));
  const { device, rank, worldSize: world } = group;
  const c = group.collectives;
  const comm = await group.nccl();
  const stream = Stream.create(device);
  if (rank === 0) await group.store.set("bench/all-to-all/seed", String(freshSeed()));
  const seed = BigInt((await group.store.get("bench/all-to-all/seed")).toString());
  const sizes = o.sizes.map((b) => Math.max(world, b - (b % world)));
  using progress = startProgress({ title: "all-to-all", total: sizes.length, rank });
  progress.log(`seed ${seed}`);
  const chosen = ALL_TO_ALL_BENCH_NAMES.filter((n) => !o.algorithms || o.algorithms.includes(n));
  const rows: AllToAllRow[] = [];
  for (const bytes of sizes) {
    const chunk = bytes / world;
    // pull stages a plain x whole.
    const names = chosen.filter((n) => n !== "pull" || bytes <= staging);
    if (names.length < chosen.length)
      progress.log(`  ${bytes} B: pull skipped (x exceeds the staging buffer)`);
    const x = Tensor.rand([bytes], "u8", { device, stream, seed, offset: BigInt(rank) << 40n });
    const outs = names.map(() => Tensor.empty([bytes], "u8", { device }));
    const symmetric = names.some((n) => n.endsWith("_symmetric"))
      ? await group.symmetric.empty([bytes], "u8")
      : undefined;
    symmetric?.tensor.copyFrom(x, stream);
    const runs = names.map((name, i): (() => void) => {
      const out = outs[i]!;
      const inPlace = READ_IN_PLACE.find((a) => name === `${a}_symmetric`);
      if (inPlace) return () => void c.allToAll(symmetric!, out, { algorithm: inPlace, stream });
      if (name !== "nccl_raw")
        return () => void c.allToAll(x, out, { algorithm: name as GpuAllToAllAlgorithm, stream });
      return () => {
        copyDeviceToDevice(out.ptr + BigInt(rank * chunk), x.ptr + BigInt(rank * chunk), chunk, stream);
        comm.group(() => {
          for (let r = 0; r < world; r++) {
            if (r === rank) continue;
            comm.send({ ptr: x.ptr + BigInt(r * chunk), numel: chunk, dtype: "u8" }, r, stream);
            comm.recv({ ptr: out.ptr + BigInt(r * chunk), numel: chunk, dtype: "u8" }, r, stream);
          }
        });
      };
    });
    progress.step(`all-to-all ${bytes} B: validating and timing ${names.join(", ")} ...`);
    for (const run of runs) run();
    group.synchronize(stream);
    comm.synchronize(stream);
    const want = outs[names.indexOf("nccl_raw")]?.toHost() ?? outs[0]!.toHost();
    for (const [i, out] of outs.entries()) {
      const got = out.toHost();
      const at = got.findIndex((v, j) => v !== want[j]);
      if (at >= 0)
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `all-to-all ${bytes} B: ${names[i]} differs from the reference at byte ${at} (rank ${rank}); not timing a wrong kernel`,
        );
    }
    const times = await timeTogether(group, stream, runs, { perGraph: perGraphFor(bytes) });
    const us = Object.fromEntries(names.map((n, i) => [n, times[i]!]));
    rows.push({ bytes, us });
    progress.log(`  ${bytes} B: ${names.map((n) => `${n} ${us[n]!.toFixed(1)}`).join(", ")} us`);
    for (const t of [x, ...outs]) t.dispose();
    await symmetric?.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: "all-to-all" as const,
          seed: seed.toString(),
          stagingBytes: staging,
          rows,
        }
      : undefined;
  await group.destroy();
  return result;
}

export function formatAllToAll(r: AllToAllBenchResult): string {
  const names = [...new Set(r.rows.flatMap((x) => Object.keys(x.us)))];
  const header = ["bytes/rank", ...names.map((n) => `${n} us`), "GB/s/rank (best)", "best/nccl_raw"];
  const rows = r.rows.map((x) => {
    const best = Math.min(
      ...names.filter((n) => n !== "nccl_raw" && x.us[n] !== undefined).map((n) => x.us[n]!),
    );
    // What crosses the links per rank: every chunk but its own.
    const moved = (x.bytes * (r.environment.worldSize - 1)) / r.environment.worldSize;
    return [
      String(x.bytes),
      ...names.map((n) => (x.us[n] === undefined ? "-" : x.us[n].toFixed(1))),
      (moved / best / 1e3).toFixed(1),
      x.us.nccl_raw === undefined ? "-" : (best / x.us.nccl_raw).toFixed(2),
    ];
  });
  const title = `all-to-all, u8, ${r.environment.worldSize} x ${r.environment.device}, staging ${r.stagingBytes} B`;
  return [title, table(header, rows)].join("\n");
}
