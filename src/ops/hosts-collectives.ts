// Collectives of a group whose members are on several hosts (init({ acrossHosts: true })): symmkit's own
// algorithms inside each host (the host's members as a group of their own, `local`, with GpuCollectives
// on its symmetric memory) and NCCL between hosts, one communicator per position within the host (the
// rails: member p of every host), plus one over the whole group (the flat `nccl` baseline, and barriers).
//
// Layout: the group's ranks are host-major (global rank = host x LOCAL_WORLD_SIZE + local rank), every
// host has k members, and the member at position p of host h is group rank h x k + p.
//   allReduce, hierarchical: the host's reduce-scatter by symmkit puts part p of the host's sum into
//     member p's output (in place, through scratch and a copy), then rail p sums part p over the hosts in
//     place (NCCL), then the host gathers the parts (symmkit).
//     Each host's sum is rounded to the dtype once in local-rank order (when the host's auto picks one of
//     symmkit's algorithms, as it does within its staging buffer unless a tune table says otherwise), then
//     NCCL's sum over hosts rounds again in NCCL's order: on 2 hosts that is one addition, so every rank
//     holds the same bits and they equal (a0 + a1 + ...) rounded + (b0 + b1 + ...) rounded; on more hosts
//     NCCL's order decides. The last (count mod k) elements go through NCCL over the whole group.
//   allGather, hierarchical: rail p gathers the members at position p of every host (NCCL), the host
//     gathers those (symmkit), and copies put the blocks in group-rank order.
//   reduceScatter, hierarchical: copies put the input's chunks in (position, host) order, the host
//     reduce-scatters (symmkit: member p gets the host's sum of the chunks of position p on every host),
//     and rail p reduce-scatters that over the hosts (NCCL).
//   send, recv, sendRecv: symmkit's own (auto: ll or put) over NVLink to a peer on this host, NCCL to one on another;
//   allToAll: NCCL's grouped sends and receives. The ops that need symmetric memory over the whole group
//   (fused matmuls, all-reduce + RMSNorm, allToAllV, MoE) are refused with UnsupportedError: they run on
//   `local`, inside a host.
// Between hosts each rank moves 1/k of the data on its own rail, about what NCCL's flat rings move per
// host too; the hierarchy's gain is fewer network steps and symmkit's microsecond NVLink phases, which
// matter for small messages (auto's rule, HIERARCHICAL_MAX_BYTES). Graphs captured on one stream share
// that stream's scratch: replay them in that stream's order, not at once on other streams.
// Checked calls (SYMMKIT_CHECK_CALLS, which every rank must set alike: create() refuses a group that
// disagrees): inside a host every call is checked as on one host (signals carry the call's fingerprint);
// NCCL between hosts carries none, so with the setting each group-wide call starts with an all-gather of
// every rank's fingerprint of it (naming its route: hierarchical or flat) over the group's communicator
// and a one-thread kernel that traps with a mismatch record if any differs (CollectiveMismatchError naming
// the rank), before anything of the call can pair with another call's NCCL operations. Point-to-point
// calls between hosts are not checked (their pairs are matched by NCCL's order alone). The words it
// gathers into are per stream, like the scratch.
import { InvalidArgumentError, UnsupportedError } from "../errors.js";
import { CALL_TAG_LAYOUT, WAIT_ENV_LAYOUT } from "../distributed/device-layouts.js";
import { agreedCheckCalls } from "./check-calls.js";
import type { GroupAlgorithmNames, GroupCollectives, Refused, SymmetricCall } from "./collectives.js";
import {
  fingerprint,
  SPENT_CALL,
  SPENT_MESSAGE,
  takeCollectiveTurns,
  type CallShape,
  type CallTag,
  type Turns,
} from "../distributed/fingerprint.js";
import type { Kernel } from "../runtime/kernel.js";
import { memset } from "../runtime/memory.js";
import { sharedModule } from "../runtime/module.js";
import { BARRIER_KERNELS, CHECK_FINGERPRINTS_PARAMS } from "./coll/programs.js";
import type { NcclComm } from "../distributed/nccl-comm.js";
import type { CollectivesFactory, ProcessGroup } from "../distributed/process-group.js";
import { Graph } from "../runtime/graph.js";
import { copy2d, DeviceMemory } from "../runtime/memory.js";
import { defaultStream, type Stream } from "../runtime/stream.js";
import { Tensor } from "../runtime/tensor.js";
import { localTurns, type GpuCollectives } from "./gpu-collectives.js";
import { checkAllToAll, checkSendRecv } from "./exchange/checks.js";
import { bytes, ncclExchange } from "./exchange/exchange.js";
import { overlaps, sameSpan } from "./gemm/matmul.js";
import {
  checkAlgorithm,
  checkDivisible,
  checkPeer,
  checkNumel,
  checkReduction,
  checkSameDtype,
  checkTensorArg,
  type ReduceOp,
} from "./validate.js";
import { HOSTS_ALGORITHMS, type HostsAlgorithm } from "./hosts-records.js";
import "./call-kinds.js"; // the operations' kinds, before this group fingerprints a call

/**
 * auto's rule until `symmkit bench hosts` has measured real hosts (docs/perf-notes.md, "Several hosts"):
 * up to 1 MiB per rank the hierarchy's few network steps and symmkit's microsecond NVLink phases should
 * beat NCCL's flat algorithms; above, its phases run one after the other while NCCL's rings overlap
 * NVLink and network, so flat NCCL.
 */
export const HIERARCHICAL_MAX_BYTES = 1 << 20;

/** What auto picks for `bytes` per rank (see HIERARCHICAL_MAX_BYTES). */
export const autoHostsAlgorithm = (bytes: number): Exclude<HostsAlgorithm, "auto"> =>
  bytes <= HIERARCHICAL_MAX_BYTES ? "hierarchical" : "nccl";

export interface HostsCallOptions {
  /** Where the call's work is enqueued (default: the device's default stream). */
  readonly stream?: Stream;
  readonly algorithm?: HostsAlgorithm;
}

/** The scratch a stream's hierarchical calls use; grown, never shrunk (see #scratch). */
interface Scratch {
  memory: DeviceMemory;
  /** Scratch a graph may have captured: never freed before dispose. */
  captured: boolean;
}

/** A CallTag in u32 words (as SYMMKIT_CHECK_CALLS gathers it). */
const TAG_WORDS = CALL_TAG_LAYOUT.bytes / 4;
/** The algorithms of a group across hosts, by call. */
type HostsAlgorithms = { readonly [K in keyof GroupAlgorithmNames]: HostsAlgorithm };

export class HostsCollectives
  implements GroupCollectives<Tensor, Tensor, HostsAlgorithms, { stream?: Stream }>, Refused<SymmetricCall>
{
  /** This host's members, with symmkit's collectives on their symmetric memory. */
  readonly local: ProcessGroup<GpuCollectives>;
  /** Hosts the group spans, and members per host. */
  readonly hosts: number;
  readonly perHost: number;
  readonly #group: ProcessGroup<HostsCollectives>;
  /** Rail: this rank's position on every host (undefined on one host). */
  readonly #railGroup: ProcessGroup | undefined;
  readonly #rail: NcclComm | undefined;
  readonly #world: NcclComm;
  readonly #scratch = new Map<Stream, Scratch[]>();
  readonly #retired: DeviceMemory[] = [];
  #token: Tensor | undefined;
  /** Group-wide calls made so far (their fingerprints' number: every rank in step counts the same). */
  #calls = 0;
  /** SYMMKIT_CHECK_CALLS: the check kernel, its WaitEnv, and per stream (as the scratch) the tags
   * [this rank's, every member's] as u32 words (CALL_TAG_LAYOUT). */
  readonly #check:
    | { kernel: Kernel<typeof CHECK_FINGERPRINTS_PARAMS>; env: Uint8Array; words: Map<Stream, Tensor> }
    | undefined;

  private constructor(
    group: ProcessGroup<HostsCollectives>,
    local: ProcessGroup<GpuCollectives>,
    railGroup: ProcessGroup | undefined,
    rail: NcclComm | undefined,
    world: NcclComm,
    checkCalls: boolean,
  ) {
    this.#group = group;
    this.local = local;
    this.#railGroup = railGroup;
    this.#rail = rail;
    this.#world = world;
    this.hosts = group.hosts.length;
    this.perHost = local.worldSize;
    if (checkCalls) {
      const env = new Uint8Array(WAIT_ENV_LAYOUT.bytes);
      const v = new DataView(env.buffer);
      v.setBigUint64(WAIT_ENV_LAYOUT.timeoutNs, group.watch.timeoutNs, true);
      v.setBigUint64(WAIT_ENV_LAYOUT.abortFlag, group.watch.abortFlagPtr, true);
      v.setBigUint64(WAIT_ENV_LAYOUT.record, group.watch.recordPtr, true);
      v.setUint32(WAIT_ENV_LAYOUT.rank, group.rank, true);
      this.#check = {
        kernel: sharedModule(BARRIER_KERNELS, group.device).kernel(
          "symmkit::check_fingerprints",
          CHECK_FINGERPRINTS_PARAMS,
        ),
        env,
        words: new Map(),
      };
    }
  }

  /** The fingerprint of a group-wide call on `stream` (one per call: every rank of the group makes the
   * same ones); with SYMMKIT_CHECK_CALLS, also the stream's words, made before anything is enqueued. */
  #fingerprint(shape: CallShape, stream: Stream): CallTag {
    const c = this.#check;
    if (c && !c.words.has(stream)) {
      if (Graph.activeCapture(stream) !== undefined)
        throw new UnsupportedError(
          "SYMMKIT_CHECK_CALLS: the first call on a stream inside a CUDA graph capture: make one call on " +
            "this stream before capturing",
        );
      // Not zeroed: a fill on another stream could land after this stream's first memset; every word is
      // written (the memset, the all-gather) before the kernel reads it.
      c.words.set(
        stream,
        Tensor.empty([TAG_WORDS * (1 + this.#group.worldSize)], "u32", { device: this.#group.device }),
      );
    }
    return fingerprint(this.#calls++, shape);
  }

  /**
   * With SYMMKIT_CHECK_CALLS on several hosts, at the start of a group-wide call (before anything of it
   * is enqueued, whichever route it takes): every rank's fingerprint of the call, gathered over the
   * group's own communicator and compared on the device (see the module's comment). On one host the
   * calls are checked by symmkit's own signals.
   */
  #verify(tag: CallTag, stream: Stream): void {
    const c = this.#check;
    if (!c || !this.#rail) return;
    const world = this.#group.worldSize;
    const words = c.words.get(stream)!;
    [tag.lo, tag.hi, tag.shapeLo, tag.shapeHi].forEach((w, i) =>
      memset(words.ptr + BigInt(4 * i), w, 4, 1, stream),
    );
    const gathered = words.slice(TAG_WORDS, TAG_WORDS * (1 + world));
    this.#world.allGather(words.slice(0, TAG_WORDS), gathered, stream);
    c.kernel.launch({ grid: 1, block: 1, stream }, gathered.ptr, world, tag, c.env);
  }

  /**
   * Collective over `group`: opens this host's group (collectives from `makeLocal`), the rail and the
   * group's own NCCL communicator. Every host must have the same number of the group's members.
   */
  static async create(
    group: ProcessGroup<HostsCollectives>,
    makeLocal: CollectivesFactory<GpuCollectives>,
  ): Promise<HostsCollectives> {
    // A rank that checks calls makes an NCCL call the others do not: every rank must check, or none.
    const checkCalls = await agreedCheckCalls(group);
    const hosts = group.hosts;
    const k = hosts[0]!.length;
    if (hosts.some((h) => h.length !== k))
      throw new InvalidArgumentError(
        `a group across hosts needs as many members on every host; this one has ${hosts.map((h) => h.length).join(", ")}`,
      );
    const mine = hosts.find((h) => h.includes(group.globalRank))!;
    const position = mine.indexOf(group.globalRank);
    const local = (await group.newGroupWith(mine, makeLocal))!;
    const railGroup =
      hosts.length > 1
        ? await group.newGroupWith(
            hosts.map((h) => h[position]!),
            undefined,
          )
        : undefined;
    const rail = await railGroup?.nccl();
    return new HostsCollectives(group, local, railGroup, rail, await group.nccl(), checkCalls);
  }

  /** Sum (or max, min) of `input` over all ranks, into `output` (default: a new tensor). */
  allReduce(input: Tensor, options: HostsCallOptions & { op?: ReduceOp; output?: Tensor } = {}): Tensor {
    const what = "allReduce";
    checkTensorArg(what, "input", input);
    if (options.output !== undefined) checkTensorArg(what, "output", options.output);
    const op = options.op ?? "sum";
    checkReduction(what, op, input.dtype);
    const stream = this.#stream(what, options, options.output ? [input, options.output] : [input]);
    if (options.output) {
      checkSameDtype(what, input, options.output);
      checkNumel(what, "output", options.output, input.numel);
      if (overlaps(input, options.output) && !sameSpan(input, options.output))
        throw new InvalidArgumentError(
          `${what}: output overlaps input without being it: pass the same tensor, or separate ones`,
        );
    }
    const flat = this.#route(what, options, input.nbytes, "all-reduce", input, op, stream);
    const output = options.output ?? Tensor.empty(input.shape, input.dtype, { device: input.device, stream });
    if (flat) {
      this.#world.allReduce(input, output, op, stream);
      return output;
    }
    if (!this.#rail) return this.local.collectives.allReduce(input, { output, op, stream });
    const k = this.perHost;
    const n = input.numel;
    const part = Math.floor(n / k);
    const main = part * k;
    const x = input.view([n]);
    const y = output.view([n]);
    // The elements past k equal parts (fewer than k) go through one communicator over the whole group,
    // so that every rank holds the same bits of them too.
    if (main < n) this.#world.allReduce(x.slice(main), y.slice(main), op, stream);
    if (part === 0) return output;
    const mine = y.slice(this.local.rank * part, (this.local.rank + 1) * part);
    // The host's reduce-scatter puts this member's part of the host's sum where it belongs in output. In
    // place it would overwrite what it still reads, so it goes through scratch and a copy instead: every
    // member makes the same collective call either way.
    const head = x.slice(0, main);
    if (overlaps(head, mine)) {
      const [part0] = this.#buffers(stream, input, [part]);
      this.local.collectives.reduceScatter(head, part0!, { op, stream });
      mine.copyFrom(part0!, stream);
    } else {
      this.local.collectives.reduceScatter(head, mine, { op, stream });
    }
    this.#rail.allReduce(mine, mine, op, stream);
    // Each member's part lies in output where the gather puts it: the copy of itself writes the same bits.
    this.local.collectives.allGather(mine, y.slice(0, main), { stream });
    return output;
  }

  /** Every rank's `input`, in group-rank order, into `output` (world x input elements). */
  allGather(input: Tensor, output: Tensor, options: HostsCallOptions = {}): Tensor {
    const what = "allGather";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    checkSameDtype(what, input, output);
    checkNumel(what, "output", output, input.numel * this.#group.worldSize);
    const stream = this.#stream(what, options, [input, output]);
    if (this.#route(what, options, input.nbytes, "all-gather", input, undefined, stream)) {
      this.#world.allGather(input, output, stream);
      return output;
    }
    if (!this.#rail) return this.local.collectives.allGather(input, output, { stream });
    const c = input.numel;
    const [byHost, byPosition] = this.#buffers(stream, input, [
      this.hosts * c,
      this.perHost * this.hosts * c,
    ]);
    this.#rail.allGather(input.view([c]), byHost!, stream);
    this.local.collectives.allGather(byHost!, byPosition!, { stream });
    this.#transpose(byPosition!, output.view([output.numel]), this.perHost, this.hosts, c, stream);
    return output;
  }

  /** Chunk `rank` of the reduction of every rank's `input` (world x output elements), into `output`. */
  reduceScatter(input: Tensor, output: Tensor, options: HostsCallOptions & { op?: ReduceOp } = {}): Tensor {
    const what = "reduceScatter";
    checkTensorArg(what, "input", input);
    checkTensorArg(what, "output", output);
    const op = options.op ?? "sum";
    checkReduction(what, op, input.dtype);
    checkSameDtype(what, input, output);
    checkDivisible(what, input, this.#group.worldSize);
    checkNumel(what, "output", output, input.numel / this.#group.worldSize);
    const stream = this.#stream(what, options, [input, output]);
    if (this.#route(what, options, output.nbytes, "reduce-scatter", input, op, stream)) {
      this.#world.reduceScatter(input, output, op, stream);
      return output;
    }
    if (!this.#rail) return this.local.collectives.reduceScatter(input, output, { op, stream });
    const c = output.numel;
    const [byPosition, hostSum] = this.#buffers(stream, input, [
      this.perHost * this.hosts * c,
      this.hosts * c,
    ]);
    this.#transpose(input.view([input.numel]), byPosition!, this.hosts, this.perHost, c, stream);
    this.local.collectives.reduceScatter(byPosition!, hostSum!, { op, stream });
    this.#rail.reduceScatter(hostSum!, output.view([c]), op, stream);
    return output;
  }

  /**
   * `x` to group rank `peer`, which calls recv (or sendRecv) with as many bytes; ordered per pair. auto and
   * hierarchical: symmkit's send/recv (its auto: ll or put) over NVLink when the peer is on this host,
   * NCCL otherwise; nccl: NCCL.
   * Every call of a pair must take the same path (the same algorithm), as with GpuCollectives.
   */
  send(x: Tensor, peer: number, options: HostsCallOptions = {}): void {
    const what = "send";
    checkTensorArg(what, "x", x);
    const [stream, local] = this.#pointToPoint(what, peer, options, [x]);
    if (local !== undefined) this.local.collectives.send(x, local, { stream });
    else this.#world.send(bytes(x), peer, stream);
  }

  /** Into `out`, what group rank `peer` sent (send or sendRecv). Returns `out`. */
  recv(out: Tensor, peer: number, options: HostsCallOptions = {}): Tensor {
    const what = "recv";
    checkTensorArg(what, "out", out);
    const [stream, local] = this.#pointToPoint(what, peer, options, [out]);
    if (local !== undefined) this.local.collectives.recv(out, local, { stream });
    else this.#world.recv(bytes(out), peer, stream);
    return out;
  }

  /** `x` to group rank `peer` and `out` from it, in one call on both ranks (sizes may differ). */
  sendRecv(x: Tensor, out: Tensor, peer: number, options: HostsCallOptions = {}): Tensor {
    const what = "sendRecv";
    checkSendRecv(what, x, out, overlaps);
    const [stream, local] = this.#pointToPoint(what, peer, options, [x, out]);
    if (local !== undefined) return this.local.collectives.sendRecv(x, out, local, { stream });
    this.#world.group(() => {
      this.#world.send(bytes(x), peer, stream);
      this.#world.recv(bytes(out), peer, stream);
    });
    return out;
  }

  /** Chunk j of `x` to group rank j, chunk i of `out` from rank i (world equal chunks): NCCL's grouped
   * sends and receives over the group (auto and nccl), this rank's own chunk copied on the stream. */
  allToAll(x: Tensor, out: Tensor, options: HostsCallOptions = {}): Tensor {
    const what = "allToAll";
    const world = this.#group.worldSize;
    checkAllToAll(what, world, x, out, overlaps);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, ["auto", "nccl"]);
    const stream = this.#stream(what, options, [x, out]);
    const chunk = x.nbytes / world;
    const span = (r: number): [number, number] => [r * chunk, chunk];
    this.#verify(
      this.#fingerprint({ kind: "all-to-all/nccl", dtype: x.dtype, count: x.numel }, stream),
      stream,
    );
    ncclExchange(this.#world, this.#group.rank, world, x, out, span, span, stream);
    return out;
  }

  /** Checks a point-to-point call; its stream, and the peer's rank in the local group if the call goes
   * through symmkit's put (the peer is on this host, and the algorithm allows it). */
  #pointToPoint(
    what: string,
    peer: number,
    options: HostsCallOptions,
    tensors: readonly Tensor[],
  ): [Stream, number | undefined] {
    checkPeer(what, peer, this.#group.worldSize, this.#group.rank);
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, HOSTS_ALGORITHMS);
    const stream = this.#stream(what, options, tensors);
    const local = this.local.ranks.indexOf(this.#group.ranks[peer]!);
    return [stream, requested === "nccl" || local < 0 ? undefined : local];
  }

  /** The calls that need symmetric memory over the whole group (SymmetricCall): not across hosts. */
  allGatherMatmul(): never {
    return this.#insideHostOnly("allGatherMatmul");
  }
  matmulReduceScatter(): never {
    return this.#insideHostOnly("matmulReduceScatter");
  }
  matmulAllReduce(): never {
    return this.#insideHostOnly("matmulAllReduce");
  }
  allReduceRmsNorm(): never {
    return this.#insideHostOnly("allReduceRmsNorm");
  }
  allToAllV(): never {
    return this.#insideHostOnly("allToAllV");
  }
  dispatch(): never {
    return this.#insideHostOnly("dispatch");
  }
  combine(): never {
    return this.#insideHostOnly("combine");
  }

  #insideHostOnly(what: SymmetricCall): never {
    throw new UnsupportedError(
      `${what} across hosts is not built: it runs on symmetric memory, which ends at a host. Call it inside ` +
        `one host, on collectives.local (this host's ${this.perHost} ranks), or compose it from allReduce, ` +
        "allGather and reduceScatter, which run across hosts",
    );
  }

  /** Every rank of the group meets here, in stream order on the device (an NCCL all-reduce of one word). */
  barrier(options: { stream?: Stream } = {}): void {
    const stream = options.stream ?? defaultStream(this.#group.device);
    this.#token ??= Tensor.empty([1], "u32", { device: this.#group.device });
    this.#verify(this.#fingerprint({ kind: "barrier", count: 0 }, stream), stream);
    this.#world.allReduce(this.#token, this.#token, "max", stream);
  }

  /** Collective: the levels' groups and communicators, then the scratch (once this GPU's work is done:
   * queued copies may still read it). */
  async dispose(): Promise<void> {
    this.#group.watch.translate(() => this.#group.device.synchronize());
    await this.#railGroup?.destroy();
    await this.local.destroy();
    for (const list of this.#scratch.values()) for (const s of list) s.memory.dispose();
    for (const m of this.#retired) m.dispose();
    this.#scratch.clear();
    this.#token?.dispose();
    for (const w of this.#check?.words.values() ?? []) w.dispose();
  }

  /** Whether a call runs as flat NCCL (asked for, auto's rule, or one rank per host); its fingerprint
   * (#fingerprint, naming the route) checked first (#verify), so that ranks whose sizes or algorithms put
   * them on different routes end in CollectiveMismatchError rather than in NCCL calls that never pair. */
  #route(
    what: string,
    options: HostsCallOptions,
    bytes: number,
    collective: "all-reduce" | "all-gather" | "reduce-scatter",
    input: Tensor,
    op: ReduceOp | undefined,
    stream: Stream,
  ): boolean {
    const flat = this.#pick(what, options, bytes) === "nccl" || this.perHost === 1;
    const kind = `${collective}/${flat ? "nccl" : "hierarchical"}` as const;
    this.#verify(this.#fingerprint({ kind, dtype: input.dtype, count: input.numel, op }, stream), stream);
    return flat;
  }

  /** `bytes`: per rank, the all-reduce's and all-gather's input, the reduce-scatter's output. */
  #pick(what: string, options: HostsCallOptions, bytes: number): Exclude<HostsAlgorithm, "auto"> {
    const requested = options.algorithm ?? "auto";
    checkAlgorithm(what, requested, HOSTS_ALGORITHMS);
    return requested === "auto" ? autoHostsAlgorithm(bytes) : requested;
  }

  #stream(what: string, options: HostsCallOptions, tensors: readonly Tensor[]): Stream {
    const device = this.#group.device;
    for (const t of tensors)
      if (t.device !== device)
        throw new InvalidArgumentError(
          `${what}: a tensor is on cuda:${t.device.ordinal}, not this rank's GPU cuda:${device.ordinal}`,
        );
    const stream = options.stream ?? defaultStream(device);
    this.#group.noteCapture(stream);
    return stream;
  }

  /**
   * Scratch tensors of `like`'s dtype and the given element counts, for work on `stream`. They grow
   * on an eager call; inside a capture they must already be large enough (the graph keeps their
   * address), so the first call of a size comes before capturing it. Memory a graph may hold is kept
   * until dispose.
   */
  #buffers(stream: Stream, like: Tensor, counts: readonly number[]): Tensor[] {
    const capturing = Graph.activeCapture(stream) !== undefined;
    let list = this.#scratch.get(stream);
    if (!list) this.#scratch.set(stream, (list = []));
    return counts.map((count, i) => {
      const bytes = count * like.elementBytes;
      let s = list[i];
      if (!s || s.memory.bytes < bytes) {
        if (capturing)
          throw new UnsupportedError(
            `a hierarchical collective of ${bytes} bytes of scratch inside a CUDA graph capture: make one ` +
              "call of that size on this stream before capturing",
          );
        if (s) {
          if (s.captured) this.#retired.push(s.memory);
          else {
            stream.synchronize();
            s.memory.dispose();
          }
        }
        s = list[i] = {
          memory: DeviceMemory.alloc(Math.max(bytes, 2 * (s?.memory.bytes ?? 0)), like.device),
          captured: false,
        };
      }
      s.captured ||= capturing;
      return Tensor.fromMemory(s.memory, [count], like.dtype);
    });
  }

  /**
   * dst[j][i] = src[i][j] for blocks of `c` elements: src is rows x cols blocks, dst cols x rows. One 2D copy
   * per row of the shorter side (a block per copied row); a copy per block where the pitch would pass the
   * device's largest (blocks of hundreds of MiB, where a copy's launch is nothing).
   */
  #transpose(src: Tensor, dst: Tensor, rows: number, cols: number, c: number, stream: Stream): void {
    const b = c * src.elementBytes;
    if (Math.max(rows, cols) * b > src.device.props.maxPitchBytes) {
      for (let i = 0; i < rows; i++)
        for (let j = 0; j < cols; j++)
          dst
            .slice((j * rows + i) * c, (j * rows + i + 1) * c)
            .copyFrom(src.slice((i * cols + j) * c, (i * cols + j + 1) * c), stream);
    } else if (rows <= cols) {
      // Row i of src, its cols blocks one after the other, into column i of dst.
      for (let i = 0; i < rows; i++)
        copy2d(dst.ptr + BigInt(i * b), rows * b, src.ptr + BigInt(i * cols * b), b, b, cols, stream);
    } else {
      // Column j of src into row j of dst.
      for (let j = 0; j < cols; j++)
        copy2d(dst.ptr + BigInt(j * rows * b), b, src.ptr + BigInt(j * b), cols * b, b, rows, stream);
    }
  }

  static {
    // A call refused before it took its turn takes it all the same (see takeTurns): the group's, and the
    // host group's, whose calls the peers' hierarchical call went ahead with. Whether the call reached
    // the host group is what tells: one refused there took that turn (GpuCollectives' own wrapper).
    const call: Turns<HostsCollectives> = {
      at: (h) => localTurns.calls(h.local.collectives),
      spend: (h) => {
        h.#calls++;
        localTurns.spendCall(h.local.collectives);
        return SPENT_CALL;
      },
    };
    // A peer on this host is reached by the host group's put (its pair's numbers) unless nccl is named;
    // between hosts NCCL matches a pair's calls by their order alone, with no number to take.
    const message = (sends: boolean, receives: boolean): Turns<HostsCollectives> => ({
      at: (h) => localTurns.messages(h.local.collectives),
      // send(x, peer, options), recv(out, peer, options), sendRecv(x, out, peer, options).
      spend: (h, _a, b, c, d) => {
        const [peer, options] = sends && receives ? [c, d] : [b, c];
        if ((options as HostsCallOptions | undefined)?.algorithm === "nccl") return undefined;
        const g = h.#group;
        const local = Number.isInteger(peer) ? h.local.ranks.indexOf(g.ranks[peer as number] ?? -1) : -1;
        if (local < 0) return undefined;
        return localTurns.skipMessages(h.local.collectives, local, sends, receives)
          ? SPENT_MESSAGE
          : undefined;
      },
    });
    takeCollectiveTurns(HostsCollectives.prototype, call, message);
  }
}
