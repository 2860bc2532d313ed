// `symmkit run -n N -- symmkit bench link`: what NVLink gives a collective's traffic pattern, every rank
// moving the same bytes to (push) or from (pull) every peer at once, by SM stores or loads at several
// launch shapes (device/include/symmkit/dist/link_probe.cuh) and by the copy engines (one
// cuMemcpyDtoDAsync per peer, rank-rotated). GPU time from CUDA-graph replays started together on all
// ranks; each variant's slots are checked once before it is timed. The floor for the collectives'
// perf notes: GB/s per rank and direction.
import { SymmkitError } from "../errors.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { ProcessGroup } from "../dist/process-group.js";
import { LINK_PROBE, linkExpr, SYMM_VIEW_PARAM } from "../dist/sync-kernels.js";
import { deviceCount } from "../runtime/device.js";
import { copyDeviceToDevice } from "../runtime/memory.js";
import { sharedModule } from "../runtime/module.js";
import { Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { startTogether } from "./collectives.js";
import { benchEnvironment, graphTimeUs, table, type BenchEnvironment } from "./report.js";

/** SM launch shapes tried: blocks, threads per block, vectors in flight per thread. */
const SHAPES = [
  [132, 512, 1],
  [132, 512, 4],
  [132, 1024, 4],
  [264, 512, 4],
  [66, 512, 4],
  [32, 512, 4],
  [16, 512, 4],
] as const;

export interface LinkRow {
  readonly engine: "sm" | "copy_engine";
  readonly direction: "push" | "pull";
  readonly blocks: number;
  readonly threads: number;
  readonly unroll: number;
  readonly us: number;
  /** Bytes this rank sent (push) or received (pull) over all its peers, per microsecond / 1e3. */
  readonly gbPerS: number;
}

export interface LinkBenchResult {
  readonly environment: BenchEnvironment;
  readonly bytesPerPeer: number;
  readonly rows: readonly LinkRow[];
}

export async function benchLink(bytesPerPeer: number): Promise<LinkBenchResult | undefined> {
  if (!Number.isSafeInteger(bytesPerPeer) || bytesPerPeer <= 0 || bytesPerPeer % 512 !== 0)
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `bench link: --bytes must be a positive multiple of 512, got ${bytesPerPeer}`,
    );
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) => GpuCollectives.create(g, 1 << 20));
  const { device, rank, worldSize: world } = group;
  if (world < 2) throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", "bench link needs 2 or more ranks");
  const stream = Stream.create(device);
  const sym = await group.symmetric.empty([(world * bytesPerPeer) / 4], "u32");
  const slot = (r: number): Tensor => sym.tensor.slice((r * bytesPerPeer) / 4, ((r + 1) * bytesPerPeer) / 4);
  const mod = sharedModule(LINK_PROBE, device);
  const rows: LinkRow[] = [];
  const measure = async (row: Omit<LinkRow, "us" | "gbPerS">, run: () => void): Promise<void> => {
    // Every slot but our own poisoned, one run, then slot p must hold peer p's pattern.
    for (let r = 0; r < world; r++) slot(r).fill(r === rank ? r + 1 : 0xdead, stream);
    group.synchronize(stream);
    await group.barrier();
    run();
    group.synchronize(stream);
    await group.barrier();
    for (let p = 0; p < world; p++) {
      const got = slot(p).toHost({ stream }) as Uint32Array;
      if (!got.every((x) => x === p + 1))
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `bench link ${row.engine} ${row.direction}: slot ${p} does not hold rank ${p}'s data`,
        );
    }
    const us = await graphTimeUs(stream, run, {
      perGraph: 5,
      beforeReplay: () => startTogether(group, stream),
      sync: () => group.synchronize(stream),
    });
    rows.push({ ...row, us, gbPerS: ((world - 1) * bytesPerPeer) / us / 1e3 });
  };
  const view = sym.deviceView();
  for (const push of [true, false]) {
    for (const [blocks, threads, unroll] of SHAPES) {
      const k = mod.kernel(linkExpr(world, push, unroll), [SYMM_VIEW_PARAM, "u64"]);
      await measure({ engine: "sm", direction: push ? "push" : "pull", blocks, threads, unroll }, () =>
        k.launch({ grid: blocks, block: threads, stream }, view, bytesPerPeer),
      );
    }
    await measure(
      { engine: "copy_engine", direction: push ? "push" : "pull", blocks: 0, threads: 0, unroll: 0 },
      () => {
        for (let k = 1; k < world; k++) {
          const p = (rank + k) % world;
          const at = BigInt((push ? rank : p) * bytesPerPeer);
          const [dst, src] = push
            ? [sym.bufferPtrs[p]! + at, sym.bufferPtrs[rank]! + at]
            : [sym.bufferPtrs[rank]! + at, sym.bufferPtrs[p]! + at];
          copyDeviceToDevice(dst, src, bytesPerPeer, stream);
        }
      },
    );
  }
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), bytesPerPeer, rows }
      : undefined;
  await sym.dispose();
  stream.dispose();
  await group.destroy();
  return result;
}

export function formatLink(r: LinkBenchResult): string {
  return [
    `${r.environment.device}, world size ${r.environment.worldSize}, ${r.bytesPerPeer} bytes to or from each peer`,
    table(
      ["engine", "direction", "blocks", "threads", "unroll", "us", "GB/s per rank"],
      r.rows.map((x) => [
        x.engine,
        x.direction,
        String(x.blocks),
        String(x.threads),
        String(x.unroll),
        x.us.toFixed(1),
        x.gbPerS.toFixed(1),
      ]),
    ),
  ].join("\n");
}
