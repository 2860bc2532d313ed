// What every benchmark result carries: the machine, the versions and the git revision it was measured
// at, so that a committed result can be traced and compared.
import os from "node:os";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { PACKAGE_ROOT, VERSION } from "../paths.js";
import { readEnvVar } from "../settings.js";
import type { Device } from "../runtime/device.js";
import { driverVersion } from "../runtime/device.js";
import { Event } from "../runtime/event.js";
import { Graph } from "../runtime/graph.js";
import type { Stream } from "../runtime/stream.js";

export function gitRevision(): string {
  const given = readEnvVar("SYMMKIT_GIT_REVISION");
  if (given) return given;
  try {
    return execFileSync("git", ["rev-parse", "--short=12", "HEAD"], {
      cwd: PACKAGE_ROOT,
      stdio: ["ignore", "pipe", "ignore"],
    })
      .toString()
      .trim();
  } catch {
    return "unknown";
  }
}

export interface BenchEnvironment {
  readonly device: string;
  readonly deviceCount: number;
  readonly worldSize: number;
  readonly driver: string;
  readonly symmkit: string;
  readonly node: string;
  readonly gitRevision: string;
  readonly date: string;
}

export function benchEnvironment(device: Device, worldSize: number, deviceCount: number): BenchEnvironment {
  return {
    device: `${device.props.name} (${device.props.arch}, ${device.props.smCount} SMs)`,
    deviceCount,
    worldSize,
    driver: driverVersion(),
    symmkit: VERSION,
    node: process.version,
    gitRevision: gitRevision(),
    date: new Date().toISOString(),
  };
}

/** The host a CPU-side measurement ran on, and how busy it was (`loadBefore`: the 1-minute load average
 * when the measurement began): such figures are only as steady as the machine. */
export function hostEnvironment(loadBefore: number | undefined): {
  machine: {
    cpus: number;
    cpu: string;
    node: string;
    loadAverage1m: { before: number | undefined; after: number | undefined };
  };
  gitRevision: string;
  date: string;
} {
  return {
    machine: {
      cpus: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? "unknown",
      node: process.version,
      loadAverage1m: { before: loadBefore, after: os.loadavg()[0] },
    },
    gitRevision: gitRevision(),
    date: new Date().toISOString(),
  };
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError("median of nothing");
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function writeJson(file: string, value: unknown): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  fs.writeFileSync(
    file,
    JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2) + "\n",
  );
}

/** A fixed-width text table. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: readonly string[]): string => r.map((c, i) => c.padStart(widths[i]!)).join("  ");
  return [line(header), ...rows.map(line)].join("\n");
}

/**
 * GPU microseconds per operation: `perGraph` calls of `enqueue` captured in one CUDA graph, replayed
 * `replays` times after 3 warm-ups, median over replays. `beforeReplay` runs on the host before each
 * (e.g. a store barrier so that all ranks start together); `sync` waits for the stream.
 */
export async function graphTimeUs(
  stream: Stream,
  enqueue: () => void,
  options: { perGraph: number; replays?: number; beforeReplay?: () => Promise<void>; sync?: () => void },
): Promise<number> {
  return (await graphTimeManyUs(stream, [enqueue], options))[0]!;
}

/**
 * GPU microseconds per operation for several implementations measured side by side: each captured in its
 * own graph of `perGraph` calls, then every replay round launches each graph once in turn (after
 * `beforeReplay`), so that drift of clocks and temperature over a run reaches every implementation
 * alike; median over `replays` rounds after 3 warm-up rounds.
 */
export async function graphTimeManyUs(
  stream: Stream,
  enqueues: readonly (() => void)[],
  options: { perGraph: number; replays?: number; beforeReplay?: () => Promise<void>; sync?: () => void },
): Promise<number[]> {
  const graphs = enqueues.map((enqueue) =>
    Graph.capture(stream, () => {
      for (let k = 0; k < options.perGraph; k++) enqueue();
    }),
  );
  const start = Event.create(stream.device);
  const end = Event.create(stream.device);
  const per = enqueues.map((): number[] => []);
  try {
    for (let r = 0; r < (options.replays ?? 20) + 3; r++) {
      for (const [i, g] of graphs.entries()) {
        await options.beforeReplay?.();
        start.record(stream);
        g.launch(stream);
        end.record(stream);
        if (options.sync) options.sync();
        else stream.synchronize();
        if (r >= 3) per[i]!.push((end.elapsedMsSince(start) * 1000) / options.perGraph);
      }
    }
  } finally {
    for (const g of graphs) g.dispose();
    start.dispose();
    end.dispose();
  }
  return per.map(median);
}
