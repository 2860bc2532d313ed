// `symmkit run -n N -- symmkit bench send-recv`: point-to-point between rank pairs (2p, 2p + 1), one way
// (the even rank sends, the odd one receives) and both ways (sendRecv), every algorithm of send/recv
// (ll, put, copy_engine, nccl). Validated first (each receiver regenerates its peer's bytes and
// compares), then timed as GPU time from CUDA-graph replays (median), every rank starting each replay
// together; a figure is the slower rank's (an ll or NCCL send may complete before its receiver has the
// message, a put send only after). GB/s is one direction's bytes over the time.
import { DEFAULT_GPU_STAGING_BYTES } from "../init.js";
import { SymmkitError } from "../errors.js";
import { gatherValues } from "../distributed/agree.js";
import { ProcessGroup } from "../distributed/process-group.js";
import { GpuCollectives } from "../ops/gpu-collectives.js";
import { GPU_SEND_RECV_ALGORITHMS, type GpuSendRecvAlgorithm } from "../ops/exchange/checks.js";
import { deviceCount } from "../runtime/device.js";
import { Stream } from "../runtime/stream.js";
import { freshSeed, Tensor } from "../runtime/tensor.js";
import { perGraphFor, timeTogether } from "./collectives.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, table, type BenchEnvironment } from "./report.js";

export const SEND_RECV_BENCH_NAMES = GPU_SEND_RECV_ALGORITHMS.filter((a) => a !== "auto");
const MODES = ["uni", "bi"] as const;

export interface SendRecvRow {
  /** Bytes of one message. */
  readonly bytes: number;
  /** GPU us per call, the slowest rank's, by `<mode>_<algorithm>` (uni: send/recv one way; bi: sendRecv). */
  readonly us: Readonly<Record<string, number>>;
}

export interface SendRecvBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: "send-recv";
  readonly seed: string;
  /** Each rank's staging buffer (copy_engine's chunks are half of it). */
  readonly stagingBytes: number;
  readonly rows: readonly SendRecvRow[];
}

export async function benchSendRecv(o: {
  sizes: readonly number[];
  algorithms?: readonly string[] | undefined;
  staging?: number | undefined;
}): Promise<SendRecvBenchResult | undefined> {
  // By default the staging buffer init() makes: copy_engine moves half of it per chunk, as in a user's job.
  const staging = o.staging ?? DEFAULT_GPU_STAGING_BYTES;
  const group = await ProcessGroup.world<GpuCollectives>({}, (g) => GpuCollectives.create(g, staging));
  const { device, rank, worldSize: world } = group;
  if (world % 2 !== 0)
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `bench send-recv pairs ranks (2p, 2p + 1): run it on an even number of ranks, not ${world}`,
    );
  const c = group.collectives;
  const stream = Stream.create(device);
  if (rank === 0) await group.store.set("bench/send-recv/seed", String(freshSeed()));
  const seed = BigInt((await group.store.get("bench/send-recv/seed")).toString());
  using progress = startProgress({ title: "send-recv", total: o.sizes.length, rank });
  progress.log(`seed ${seed}`);
  const peer = rank ^ 1;
  const algorithms = SEND_RECV_BENCH_NAMES.filter((a) => !o.algorithms || o.algorithms.includes(a));
  const names = MODES.flatMap((m) => algorithms.map((a) => `${m}_${a}`));
  const rows: SendRecvRow[] = [];
  for (const bytes of o.sizes) {
    const gen = { device, stream, seed };
    const mine = Tensor.rand([bytes], "u8", { ...gen, offset: BigInt(rank) << 40n });
    const theirs = Tensor.rand([bytes], "u8", { ...gen, offset: BigInt(peer) << 40n });
    const outs = names.map(() => Tensor.empty([bytes], "u8", { device }));
    const runs = names.map((name, i): (() => void) => {
      const algorithm = name.slice(name.indexOf("_") + 1) as GpuSendRecvAlgorithm;
      const out = outs[i]!;
      if (name.startsWith("bi_")) return () => void c.sendRecv(mine, out, peer, { algorithm, stream });
      return rank % 2 === 0
        ? () => c.send(mine, peer, { algorithm, stream })
        : () => void c.recv(out, peer, { algorithm, stream });
    });
    progress.step(`send-recv ${bytes} B: validating and timing ${names.join(", ")} ...`);
    for (const run of runs) run();
    group.synchronize(stream);
    const want = theirs.toHost();
    for (const [i, name] of names.entries()) {
      if (name.startsWith("uni_") && rank % 2 === 0) continue;
      const got = outs[i]!.toHost();
      const at = got.findIndex((v, j) => v !== want[j]);
      if (at >= 0)
        throw new SymmkitError(
          "SYMMKIT_INVALID_ARGUMENT",
          `send-recv ${bytes} B: ${name} received a wrong byte at ${at} (rank ${rank}); not timing a wrong kernel`,
        );
    }
    const ours = await timeTogether(group, stream, runs, { perGraph: perGraphFor(bytes) });
    const all = await gatherValues(group, `bench/send-recv/${bytes}`, JSON.stringify(ours));
    const slowest = names.map((_, i) => Math.max(...all.map((r) => (JSON.parse(r) as number[])[i]!)));
    const us = Object.fromEntries(names.map((n, i) => [n, slowest[i]!]));
    rows.push({ bytes, us });
    progress.log(`  ${bytes} B: ${names.map((n) => `${n} ${us[n]!.toFixed(1)}`).join(", ")} us`);
    for (const t of [mine, theirs, ...outs]) t.dispose();
  }
  stream.dispose();
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: "send-recv" as const,
          seed: seed.toString(),
          stagingBytes: staging,
          rows,
        }
      : undefined;
  await group.destroy();
  return result;
}

export function formatSendRecv(r: SendRecvBenchResult): string {
  const names = [...new Set(r.rows.flatMap((x) => Object.keys(x.us)))];
  const header = ["bytes", ...names.flatMap((n) => [`${n} us`, `${n} GB/s`])];
  const rows = r.rows.map((x) => [
    String(x.bytes),
    ...names.flatMap((n) =>
      x.us[n] === undefined ? ["-", "-"] : [x.us[n].toFixed(1), (x.bytes / x.us[n] / 1e3).toFixed(1)],
    ),
  ]);
  return [
    `send-recv (the slower rank of each pair), ${r.environment.worldSize} x ${r.environment.device}, staging ${r.stagingBytes} B`,
    table(header, rows),
  ].join("\n");
}
