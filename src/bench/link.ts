// `symmkit run -n N -- symmkit bench link`: what NVLink gives a collective's traffic pattern, every rank
// moving the same bytes to (push) or from (pull) every peer at once: by SM stores or loads at several
// launch shapes (device/include/symmkit/probes/link_probe.cuh), by the copy engines (one cuMemcpyDtoDAsync
// per peer, rank-rotated), and by the copy engines pushing on one stream while they pull on another (as
// a copy-engine all-reduce would overlap its two phases). GPU time from CUDA-graph replays started
// together on all ranks; each variant's slots are checked once before it is timed. The floor for the
// collectives' perf notes: GB/s per rank and direction.
import { SymmkitError } from "../errors.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { LINK_PROBE, linkExpr } from "../distributed/sync-kernels.js";
import { SYMM_VIEW_PARAM } from "../distributed/device-layouts.js";
import { deviceCount } from "../runtime/device.js";
import { copyDeviceToDevice } from "../runtime/memory.js";
import { sharedModule } from "../runtime/module.js";
import { Event } from "../runtime/event.js";
import { Stream } from "../runtime/stream.js";
import type { Tensor } from "../runtime/tensor.js";
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
  readonly direction: "push" | "pull" | "push+pull";
  readonly blocks: number;
  readonly threads: number;
  readonly unroll: number;
  readonly us: number;
  /** Bytes this rank sent (push) or received (pull; push+pull: both) over all its peers, per
   * microsecond / 1e3. */
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
  const side = Stream.create(device);
  const fork = Event.create(device, { timing: false });
  const join = Event.create(device, { timing: false });
  // Slots 0..W-1 as link_copy uses them; copy-engine pulls land in slot W + p.
  const sym = await group.symmetric.empty([(2 * world * bytesPerPeer) / 4], "u32");
  const slot = (r: number): Tensor => sym.tensor.slice((r * bytesPerPeer) / 4, ((r + 1) * bytesPerPeer) / 4);
  const mod = sharedModule(LINK_PROBE, device);
  const rows: LinkRow[] = [];
  const measure = async (
    row: Omit<LinkRow, "us" | "gbPerS">,
    landed: readonly number[],
    run: () => void,
  ): Promise<void> => {
    // Every slot but our own two poisoned, one run, then slot base + p must hold peer p's pattern for
    // each base in `landed`.
    for (let r = 0; r < 2 * world; r++) slot(r).fill(r % world === rank ? rank + 1 : 0xdead, stream);
    group.synchronize(stream);
    await group.barrier();
    run();
    group.synchronize(stream);
    await group.barrier();
    for (const base of landed) {
      for (let p = 0; p < world; p++) {
        const got = slot(base + p).toHost({ stream }) as Uint32Array;
        if (!got.every((x) => x === p + 1))
          throw new SymmkitError(
            "SYMMKIT_INVALID_ARGUMENT",
            `bench link ${row.engine} ${row.direction}: slot ${base + p} does not hold rank ${p}'s data`,
          );
      }
    }
    const us = await graphTimeUs(stream, run, {
      perGraph: 5,
      beforeReplay: () => startTogether(group, stream),
      sync: () => group.synchronize(stream),
    });
    rows.push({ ...row, us, gbPerS: (landed.length * (world - 1) * bytesPerPeer) / us / 1e3 });
  };
  /** One copy per peer on `s`, rank-rotated: our slot into theirs (push), or theirs into slot W + p. */
  const copies = (push: boolean, s: Stream): void => {
    for (let k = 1; k < world; k++) {
      const p = (rank + k) % world;
      const [dst, src] = push
        ? [
            sym.bufferPtrs[p]! + BigInt(rank * bytesPerPeer),
            sym.bufferPtrs[rank]! + BigInt(rank * bytesPerPeer),
          ]
        : [
            sym.bufferPtrs[rank]! + BigInt((world + p) * bytesPerPeer),
            sym.bufferPtrs[p]! + BigInt(p * bytesPerPeer),
          ];
      copyDeviceToDevice(dst, src, bytesPerPeer, s);
    }
  };
  const ce = { engine: "copy_engine", blocks: 0, threads: 0, unroll: 0 } as const;
  const view = sym.deviceView();
  for (const push of [true, false]) {
    for (const [blocks, threads, unroll] of SHAPES) {
      const k = mod.kernel(linkExpr(world, push, unroll), [SYMM_VIEW_PARAM, "u64"]);
      const row = { engine: "sm", direction: push ? "push" : "pull", blocks, threads, unroll } as const;
      await measure(row, [0], () => k.launch({ grid: blocks, block: threads, stream }, view, bytesPerPeer));
    }
    await measure({ ...ce, direction: push ? "push" : "pull" }, [push ? 0 : world], () =>
      copies(push, stream),
    );
  }
  await measure({ ...ce, direction: "push+pull" }, [0, world], () => {
    fork.record(stream);
    side.waitEvent(fork);
    copies(true, stream);
    copies(false, side);
    join.record(side);
    stream.waitEvent(join);
  });
  const result =
    rank === 0
      ? { environment: benchEnvironment(device, world, deviceCount()), bytesPerPeer, rows }
      : undefined;
  await sym.dispose();
  for (const d of [stream, side, fork, join]) d.dispose();
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
