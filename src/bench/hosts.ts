// `symmkit bench hosts`, under symmkit run on several hosts (--nnodes M, one SYMMKIT_JOB_TOKEN): the
// collectives of a group across hosts (init({ acrossHosts: true })), hierarchical (symmkit inside each
// host, NCCL between hosts) against flat NCCL over the whole group, in the same run. Each size is
// validated first (every rank's input small integers, so every sum is exact in bf16 and must equal the
// closed form on every rank), then timed as GPU time from CUDA-graph replays, the implementations
// replayed in turn, every rank starting each replay together (a store barrier, then the group's NCCL
// barrier on the stream); medians. Sizes are bytes per rank: all-reduce and all-gather input,
// reduce-scatter output.
import { SymmkitError } from "../errors.js";
import { init, type HostsProcessGroup } from "../init.js";
import { HOSTS_ALGORITHMS, type HostsAlgorithm } from "../ops/hosts-records.js";
import { deviceCount } from "../runtime/device.js";
import { encode } from "../runtime/dtype.js";
import { Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { perGraphFor } from "./collectives.js";
import { startProgress } from "./progress.js";
import { benchEnvironment, graphTimeManyUs, table, type BenchEnvironment } from "./report.js";

const TIMED = HOSTS_ALGORITHMS.filter((a): a is Exclude<HostsAlgorithm, "auto"> => a !== "auto");
export const HOSTS_BENCH_COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter"] as const;
type HostsBenchCollective = (typeof HOSTS_BENCH_COLLECTIVES)[number];

export interface HostsBenchRow {
  readonly collective: HostsBenchCollective;
  /** Bytes per rank (see above). */
  readonly bytes: number;
  /** GPU us per call, by algorithm. */
  readonly us: Readonly<Record<(typeof TIMED)[number], number>>;
}

export interface HostsBenchResult {
  readonly environment: BenchEnvironment;
  readonly bench: "hosts";
  readonly hosts: number;
  readonly perHost: number;
  readonly rows: readonly HostsBenchRow[];
}

/** Rank r's element i of call `salt`: -1, 0 or 1 (bf16 holds every integer sum of up to 256 ranks). */
const value = (r: number, i: number, salt: number): number => ((i * 5 + r * 7 + salt) % 3) - 1;
const MAX_EXACT_RANKS = 256;

/**
 * GPU us per call of each of `runs` (validated before) in a group across hosts: the ranks meet, then
 * graphs of `perGraph` calls are replayed in turn, every rank starting each replay together (a store
 * barrier, then the group's NCCL barrier on the stream); medians.
 */
export async function timeAcrossHosts(
  group: HostsProcessGroup,
  stream: Stream,
  runs: readonly (() => void)[],
  o: { perGraph: number; replays: number },
): Promise<number[]> {
  await group.barrier();
  return graphTimeManyUs(stream, runs, {
    ...o,
    beforeReplay: async () => {
      await group.barrier();
      group.collectives.barrier({ stream });
    },
    sync: () => group.synchronize(stream),
  });
}

export async function benchHosts(o: {
  sizes: readonly number[];
  collectives?: readonly string[] | undefined;
}): Promise<HostsBenchResult | undefined> {
  const group = await init({ acrossHosts: true });
  const c = group.collectives;
  const { device, rank, worldSize: world } = group;
  if (world > MAX_EXACT_RANKS)
    throw new SymmkitError(
      "SYMMKIT_INVALID_ARGUMENT",
      `bench hosts validates exact bf16 sums of up to ${MAX_EXACT_RANKS} ranks, not ${world}`,
    );
  const stream = Stream.create(device);
  const collectives = HOSTS_BENCH_COLLECTIVES.filter((x) => !o.collectives || o.collectives.includes(x));
  using progress = startProgress({ title: "hosts", total: o.sizes.length * collectives.length, rank });
  progress.log(`${c.hosts} hosts x ${c.perHost} ranks`);
  const rows: HostsBenchRow[] = [];
  for (const [salt, bytes] of o.sizes.entries())
    for (const collective of collectives) {
      progress.step(`${collective} ${bytes} B: validating and timing ${TIMED.join(", ")} ...`);
      const n = Math.max(1, Math.floor(bytes / 2));
      const moved = 2 * n;
      const inputCount = collective === "reduce-scatter" ? n * world : n;
      const outputCount = collective === "all-gather" ? n * world : n;
      const input = (r: number): number[] => Array.from({ length: inputCount }, (_, i) => value(r, i, salt));
      const x = Tensor.fromHost(encode("bf16", input(rank)), "bf16", { shape: [inputCount] });
      const outs = TIMED.map(() => Tensor.empty([outputCount], "bf16", { device }));
      const runs = TIMED.map((algorithm, i) => (): void => {
        const out = outs[i]!;
        if (collective === "all-reduce") c.allReduce(x, { output: out, algorithm, stream });
        else if (collective === "all-gather") c.allGather(x, out, { algorithm, stream });
        else c.reduceScatter(x, out, { algorithm, stream });
      });
      for (const run of runs) run();
      group.synchronize(stream);
      const all = group.ranks.map(input);
      const want =
        collective === "all-gather"
          ? all.flat()
          : Array.from({ length: n }, (_, i) => {
              const at = collective === "reduce-scatter" ? rank * n + i : i;
              return all.reduce((s, v) => s + v[at]!, 0);
            });
      const wantRaw = encode("bf16", want);
      for (const [i, algorithm] of TIMED.entries()) {
        const got = outs[i]!.toHost({ stream });
        const at = got.findIndex((v, j) => v !== wantRaw[j]);
        if (at >= 0)
          throw new SymmkitError(
            "SYMMKIT_INVALID_ARGUMENT",
            `hosts ${collective} ${bytes} B: ${algorithm} is wrong at element ${at} on rank ${rank}; not timing it`,
          );
      }
      const times = await timeAcrossHosts(group, stream, runs, { perGraph: perGraphFor(bytes), replays: 15 });
      const us = { hierarchical: times[0]!, nccl: times[1]! };
      rows.push({ collective, bytes: moved, us });
      progress.log(
        `  ${collective} ${bytes} B: hierarchical ${us.hierarchical.toFixed(1)}, nccl ${us.nccl.toFixed(1)} us`,
      );
      for (const t of [x, ...outs]) t.dispose();
    }
  const result =
    rank === 0
      ? {
          environment: benchEnvironment(device, world, deviceCount()),
          bench: "hosts" as const,
          hosts: c.hosts,
          perHost: c.perHost,
          rows,
        }
      : undefined;
  await group.destroy();
  stream.dispose();
  return result;
}

export function formatHosts(r: HostsBenchResult): string {
  const rows = r.rows.map((x) => [
    x.collective,
    String(x.bytes),
    x.us.hierarchical.toFixed(1),
    x.us.nccl.toFixed(1),
    (x.us.nccl / x.us.hierarchical).toFixed(2),
  ]);
  return [
    `collectives across ${r.hosts} hosts x ${r.perHost} ranks (${r.environment.device}), GPU us per call`,
    table(["collective", "bytes", "hierarchical", "nccl", "nccl / hierarchical"], rows),
  ].join("\n");
}
