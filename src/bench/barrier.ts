// `symmkit run -n N -- symmkit bench barrier`: the cost of the cross-GPU primitives, in GPU time from
// CUDA-graph replays. A kernel runs `iterations` barriers back to back; per-barrier time is the replay
// time over all barriers it ran. The put/wait round trip is measured between ranks 0 and 1.
import { SymmkitError } from "../errors.js";
import { initCuda as init } from "../distributed/process-group.js";
import { barrierLoopExpr, SYNC_KERNELS } from "../distributed/sync-kernels.js";
import { SYMM_VIEW_PARAM } from "../distributed/device-layouts.js";
import { deviceCount } from "../runtime/device.js";
import { Event } from "../runtime/event.js";
import { Graph } from "../runtime/graph.js";
import { copyDeviceToHost } from "../runtime/memory.js";
import { sharedModule } from "../runtime/module.js";
import { Stream } from "../runtime/stream.js";
import { benchEnvironment, median, table, type BenchEnvironment } from "./report.js";

export interface BarrierRow {
  readonly measure: string;
  readonly blocks: number;
  readonly usPerOp: number;
}

export interface BarrierBenchResult {
  readonly environment: BenchEnvironment;
  readonly rows: readonly BarrierRow[];
}

export async function benchBarrier(): Promise<BarrierBenchResult | undefined> {
  const group = await init();
  const { device } = group;
  const stream = Stream.create(device);
  const sym = await group.symmetric.empty([1024], "u32");
  const mod = sharedModule(SYNC_KERNELS, device);
  const iterations = 1000;
  const launchesPerGraph = 5;
  const replays = 25;
  const rows: BarrierRow[] = [];

  const time = async (
    measure: string,
    blocks: number,
    launch: () => void,
    opsPerLaunch: number,
  ): Promise<void> => {
    launch(); // validate and warm up: the pads must come back idle
    group.synchronize(stream);
    const pad = new Uint32Array(sym.padBytes / 4);
    copyDeviceToHost(pad, sym.padPtrs[group.rank]!, stream);
    if (!pad.every((x) => x === 0))
      throw new SymmkitError("SYMMKIT_INVALID_ARGUMENT", `${measure}: signal pad not idle`);
    await group.barrier();
    const g = Graph.capture(stream, () => {
      for (let i = 0; i < launchesPerGraph; i++) launch();
    });
    const start = Event.create(device);
    const end = Event.create(device);
    const per: number[] = [];
    for (let r = 0; r < replays + 3; r++) {
      await group.barrier(); // start each replay together, so no rank's wait includes a peer's host lag
      start.record(stream);
      g.launch(stream);
      end.record(stream);
      group.synchronize(stream);
      if (r >= 3) per.push((end.elapsedMsSince(start) * 1000) / (launchesPerGraph * opsPerLaunch));
    }
    g.dispose();
    start.dispose();
    end.dispose();
    rows.push({ measure, blocks, usPerOp: median(per) });
  };

  for (const [prev, next, name] of [
    [false, false, "barrier, relaxed"],
    [true, true, "symm_sync<true, true>"],
  ] as const) {
    const k = mod.kernel(barrierLoopExpr(prev, next), [SYMM_VIEW_PARAM, "u32"]);
    for (const blocks of [1, 32]) {
      await time(
        name,
        blocks,
        () => k.launch({ grid: blocks, block: 32, stream }, sym.deviceView(), iterations),
        iterations,
      );
    }
  }
  const ping = mod.kernel("symmkit::ping_pong", [SYMM_VIEW_PARAM, "u32"]);
  await time(
    "put/wait round trip, ranks 0-1",
    1,
    () => ping.launch({ grid: 1, block: 32, stream }, sym.deviceView(), iterations),
    iterations,
  );

  const result =
    group.rank === 0
      ? { environment: benchEnvironment(device, group.worldSize, deviceCount()), rows }
      : undefined;
  await sym.dispose();
  stream.dispose();
  await group.destroy();
  return result;
}

export function formatBarrier(r: BarrierBenchResult): string {
  return [
    `device: ${r.environment.device}, world size ${r.environment.worldSize}`,
    table(
      ["measure", "blocks", "us/op"],
      r.rows.map((x) => [x.measure, String(x.blocks), x.usPerOp.toFixed(2)]),
    ),
  ].join("\n");
}
