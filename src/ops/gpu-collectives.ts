// The GPU backend's collectives: a facade over one group context (gpu-group.ts) and the op families that
// run on it (coll/gpu-coll.ts, fused/fused-matmul.ts, norm/ar-norm.ts, exchange/p2p.ts,
// exchange/all-to-all.ts, moe/moe.ts). Each family checks its arguments, picks its algorithm and
// fingerprints its call; this class only routes, and makes a call refused before it took its number take
// it all the same (takeCollectiveTurns).
import { SPENT_CALL, SPENT_MESSAGE, takeCollectiveTurns, type Turns } from "../distributed/fingerprint.js";
import type { ProcessGroup } from "../distributed/process-group.js";
import type { SymmetricTensor } from "../distributed/symmetric-memory.js";
import type { Tensor } from "../runtime/tensor.js";
import {
  GpuColl,
  type AllGatherOptions,
  type AllReduceOptions,
  type ReduceScatterOptions,
} from "./coll/gpu-coll.js";
import type { CollectiveName, GpuAlgorithm } from "./coll/registry.js";
import type { Collectives } from "./collectives.js";
import { GpuAllToAll } from "./exchange/all-to-all.js";
import type { GpuAllToAllAlgorithm, GpuAllToAllVAlgorithm, GpuSendRecvAlgorithm } from "./exchange/checks.js";
import type { ExchangeInput } from "./exchange/exchange.js";
import { GpuPointToPoint } from "./exchange/p2p.js";
import type {
  AllGatherMatmulAlgorithm,
  AllGatherMatmulOptions,
  FusedMatmulOptions,
  MatmulAllReduceAlgorithm,
  MatmulAllReduceOptions,
  MatmulReduceScatterAlgorithm,
} from "./fused/checks.js";
import { FusedMatmul, type FusedAutoRules, type FusedInput } from "./fused/fused-matmul.js";
import {
  GpuGroup,
  type GpuAlgorithms,
  type CollectiveInput,
  type CollectiveOptions,
  type GpuCollectivesOptions,
} from "./gpu-group.js";
import type { CombineOptions, DispatchOptions, DispatchResult, MoeHandle } from "./moe/checks.js";
import { GpuMoe } from "./moe/moe.js";
import type { GpuCombineAlgorithm, GpuMoeAlgorithm } from "./moe/checks.js";
import type { AllReduceRmsNormOptions, ArNormAlgorithm } from "./norm/checks.js";
import { ArNorm, type ArNormInput, type ArNormResult } from "./norm/ar-norm.js";
import type { LoadedTuneTable } from "./tune-table.js";

/**
 * A host's group's numbers, for HostsCollectives, whose calls run through it: its call number and its
 * messages' count (what GpuCollectives' calls take their turns from), and how to take a turn of each
 * for a call refused before it reached this group (see takeTurns). Not part of the package's API.
 */
export interface LocalTurns {
  readonly calls: (c: GpuCollectives) => number;
  readonly spendCall: (c: GpuCollectives) => void;
  readonly messages: (c: GpuCollectives) => number;
  readonly skipMessages: (c: GpuCollectives, peer: unknown, sends: boolean, receives: boolean) => boolean;
}
// Set by GpuCollectives' static block, which alone sees its private fields.
export let localTurns: LocalTurns;

type O<T> = CollectiveOptions & T;

/** Every call's contract is in Collectives (src/ops/collectives.ts) and, for what only GPUs do, beside the
 * family that runs it. */
export class GpuCollectives implements Collectives<
  Tensor,
  CollectiveInput,
  GpuAlgorithms,
  CollectiveOptions
> {
  readonly #g: GpuGroup;
  readonly #coll: GpuColl;
  readonly #fused: FusedMatmul;
  readonly #arNorm: ArNorm;
  readonly #p2p: GpuPointToPoint;
  readonly #a2a: GpuAllToAll;
  readonly #moe: GpuMoe;

  private constructor(g: GpuGroup) {
    this.#g = g;
    this.#coll = new GpuColl(g);
    this.#arNorm = new ArNorm(g, this.#coll);
    this.#fused = new FusedMatmul(g, this.#coll, this.#arNorm);
    this.#p2p = new GpuPointToPoint(g);
    this.#a2a = new GpuAllToAll(g);
    this.#moe = new GpuMoe(g);
  }

  /** Collective: the group's staging buffer, mailbox, inbox and NCCL communicator (GpuGroup.create). */
  static async create(
    group: ProcessGroup<GpuCollectives>,
    stagingBytes: number,
    options: GpuCollectivesOptions = {},
  ): Promise<GpuCollectives> {
    return new GpuCollectives(await GpuGroup.create(group, stagingBytes, options));
  }

  /** The tune table auto picks from (see src/ops/tune-table.ts), if this machine has one. */
  get tuneTable(): LoadedTuneTable | undefined {
    return this.#g.tuned;
  }

  get capacityBytes(): number {
    return this.#g.capacityBytes;
  }

  /** The group's symmetric staging buffer (and its signal pad): the collectives stage plain inputs and
   * the fused matmuls receive there. Kernels of one's own may use it between collective calls. */
  get staging(): SymmetricTensor {
    return this.#g.staging;
  }

  /** What one rank may push to one peer in a mailbox call (lamport, ll). */
  get mailboxSlotBytes(): number {
    return this.#g.mailbox.slotBytes;
  }

  allReduce(input: CollectiveInput, options: AllReduceOptions = {}): Tensor {
    return this.#coll.allReduce(input, options);
  }

  allGather(input: CollectiveInput, output: Tensor, options: AllGatherOptions = {}): Tensor {
    return this.#coll.allGather(input, output, options);
  }

  reduceScatter(input: CollectiveInput, output: Tensor, options: ReduceScatterOptions = {}): Tensor {
    return this.#coll.reduceScatter(input, output, options);
  }

  /** What auto runs for `bytes` per rank (see GpuColl.autoAlgorithm). */
  autoAlgorithm<C extends CollectiveName>(collective: C, bytes: number, staged = 0): GpuAlgorithm<C> {
    return this.#coll.autoAlgorithm(collective, bytes, staged);
  }

  /** Whether `algorithm` can run `bytes` per rank here (see autoAlgorithm). */
  canRun(collective: CollectiveName, algorithm: string, bytes: number, staged = 0): boolean {
    return this.#coll.canRun(collective, algorithm, bytes, staged);
  }

  /** The GEMM runs while the peers' shards arrive (src/ops/fused/fused-matmul.ts); a plain shard is
   * staged in the group's symmetric buffer, a symmetric one read in place. */
  allGatherMatmul(
    aShard: FusedInput,
    b: Tensor,
    options: O<AllGatherMatmulOptions<Tensor> & { algorithm?: AllGatherMatmulAlgorithm }> = {},
  ): { out: Tensor; gathered: Tensor } {
    return this.#fused.allGatherMatmul(aShard, b, { ...options, stream: this.#g.stream(options) });
  }

  /** `fused` needs m x n x 2 bytes of the staging buffer. */
  matmulReduceScatter(
    a: Tensor,
    b: Tensor,
    options: O<FusedMatmulOptions<Tensor> & { algorithm?: MatmulReduceScatterAlgorithm }> = {},
  ): Tensor {
    return this.#fused.matmulReduceScatter(a, b, { ...options, stream: this.#g.stream(options) });
  }

  /** `fused` needs world x m x n x 2 bytes of the staging buffer. */
  matmulAllReduce(
    a: Tensor,
    b: Tensor,
    options: O<MatmulAllReduceOptions<Tensor> & { algorithm?: MatmulAllReduceAlgorithm }> = {},
  ): Tensor {
    return this.#fused.matmulAllReduce(a, b, { ...options, stream: this.#g.stream(options) });
  }

  /** The fused matmuls' auto rules, for inspection (see FusedMatmul). */
  get fusedMatmul(): FusedAutoRules {
    return this.#fused;
  }

  allReduceRmsNorm(
    x: ArNormInput,
    options: O<AllReduceRmsNormOptions<Tensor> & { algorithm?: ArNormAlgorithm }>,
  ): ArNormResult {
    return this.#arNorm.run(x, options, this.#g.stream(options));
  }

  /** What auto picks for allReduceRmsNorm on `bytes` of x per rank in `rows` rows. */
  autoArNormAlgorithm(bytes: number, rows: number): Exclude<ArNormAlgorithm, "auto"> {
    return this.#arNorm.autoAlgorithm(bytes, rows);
  }

  /** auto: ll up to LL_AUTO_MAX_BYTES (this rank's blocks store x as flagged lines into the peer's inbox
   * over NVLink and finish), put above (stored in chunks, each signalled and acknowledged). The call
   * completes on the stream once x may be reused: with ll once the message is in the peer's inbox, with the
   * others once the peer has it. */
  send(x: Tensor, peer: number, options: O<{ algorithm?: GpuSendRecvAlgorithm }> = {}): void {
    this.#p2p.send(x, peer, options);
  }

  recv(out: Tensor, peer: number, options: O<{ algorithm?: GpuSendRecvAlgorithm }> = {}): Tensor {
    this.#p2p.recv(out, peer, options);
    return out;
  }

  sendRecv(
    x: Tensor,
    out: Tensor,
    peer: number,
    options: O<{ algorithm?: GpuSendRecvAlgorithm }> = {},
  ): Tensor {
    this.#p2p.sendRecv(x, out, peer, options);
    return out;
  }

  /** A symmetric x is read in place by pull and copy_engine. auto: the records' rules (exchange/records.ts)
   * over x's bytes, the world and whether x is symmetric; every rank passes x alike. */
  allToAll(input: ExchangeInput, out: Tensor, options: O<{ algorithm?: GpuAllToAllAlgorithm }> = {}): Tensor {
    return this.#a2a.allToAll(input, out, options);
  }

  /** Counts as an array wait on the host (not capturable); as an i32 tensor (pull) they stay on the
   * device, and a call the GPU refuses throws at the next group.synchronize() (src/ops/exchange/all-to-all.ts). */
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[],
    options?: O<{ recvCounts?: readonly number[]; algorithm?: GpuAllToAllVAlgorithm }>,
  ): { output: Tensor; recvCounts: number[] };
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: Tensor,
    options?: O<{ recvCountsOut?: Tensor; algorithm?: GpuAllToAllVAlgorithm }>,
  ): { output: Tensor; recvCounts: Tensor };
  allToAllV(
    x: Tensor,
    out: Tensor,
    sendCounts: readonly number[] | Tensor,
    options: O<{
      recvCounts?: readonly number[];
      recvCountsOut?: Tensor;
      algorithm?: GpuAllToAllVAlgorithm;
    }> = {},
  ): { output: Tensor; recvCounts: number[] | Tensor } {
    return this.#a2a.allToAllV(x, out, sendCounts, options);
  }

  /** pull waits on the host for the peers' counts (not capturable); pull_device (auto inside a capture or
   * with `into`) routes on the device (src/ops/moe/moe.ts). */
  dispatch(
    tokens: Tensor,
    topkIdx: Tensor,
    topkWeights: Tensor,
    options: O<DispatchOptions<Tensor> & { algorithm?: GpuMoeAlgorithm }>,
  ): DispatchResult<Tensor> {
    return this.#moe.dispatch(tokens, topkIdx, topkWeights, options);
  }

  /** A symmetric `expertOut` (every rank passes one of this group's) is read in place by the peers. */
  combine(
    expertOut: CollectiveInput,
    handle: MoeHandle<Tensor>,
    options: O<CombineOptions<Tensor> & { algorithm?: GpuCombineAlgorithm }> = {},
  ): Tensor {
    return this.#moe.combine(expertOut, handle, options);
  }

  /** With `holdNs` the barrier kernel then waits that long, so that work the host enqueues behind it
   * starts on all ranks within about one barrier latency of each other (benchmarks start timed work so). */
  barrier(options: O<{ holdNs?: number }> = {}): void {
    this.#coll.barrier(options);
  }

  /** Collective: releases the staging buffer, the mailbox and the inbox. */
  async dispose(): Promise<void> {
    this.#fused.dispose();
    this.#moe.dispose();
    this.#p2p.dispose();
    this.#a2a.dispose();
    await this.#g.dispose();
  }

  static {
    localTurns = {
      calls: (c) => c.#g.calls,
      spendCall: (c) => void c.#g.calls++,
      messages: (c) => c.#p2p.messages,
      skipMessages: (c, peer, sends, receives) => c.#p2p.skip(peer, sends, receives),
    };
    // A call refused before it took its number takes it all the same (see takeTurns). The families take
    // theirs through GpuGroup.tag: whatever they refuse, the wrapper of the call that reached them sees.
    const call: Turns<GpuCollectives> = {
      at: localTurns.calls,
      spend: (c) => {
        localTurns.spendCall(c);
        return SPENT_CALL;
      },
    };
    // put and copy_engine number a pair's messages (nccl has no numbers: spending one is harmless).
    const message = (sends: boolean, receives: boolean): Turns<GpuCollectives> => ({
      at: localTurns.messages,
      // The peer: send(x, peer), recv(out, peer), sendRecv(x, out, peer).
      spend: (self, _a, b, c) =>
        localTurns.skipMessages(self, sends && receives ? c : b, sends, receives) ? SPENT_MESSAGE : undefined,
    });
    takeCollectiveTurns(GpuCollectives.prototype, call, message);
  }
}
