// What the exchange's calls share (p2p.ts: send/recv; all-to-all.ts: allToAll, allToAllV) and what the
// groups across hosts reuse: NCCL's view of a tensor's bytes, and one NCCL group of matched sends and
// receives. NCCL matches point-to-point calls in order per pair, as symmkit's own are.
import type { NcclComm, NcclSpan } from "../../distributed/nccl-comm.js";
import type { SymmetricTensor } from "../../distributed/symmetric-memory.js";
import { copyDeviceToDevice } from "../../runtime/memory.js";
import type { Stream } from "../../runtime/stream.js";
import type { Tensor } from "../../runtime/tensor.js";

/** What allToAll takes: a plain tensor, or a symmetric one read in place. */
export type ExchangeInput = Tensor | SymmetricTensor;

/** `count` bytes of `t` from byte `at`, as NCCL moves them (every dtype as u8). */
export const bytes = (t: Tensor, at = 0, count = t.nbytes): NcclSpan => ({
  ptr: t.ptr + BigInt(at),
  numel: count,
  dtype: "u8",
});

/** One NCCL group on `comm` (this rank `rank` of `world`): span `send(r)` of x to rank r, span `recv(r)` of
 * out from rank r ([byte offset, bytes]); this rank's own span copied. Empty spans are skipped on both
 * sides (both know them). */
export function ncclExchange(
  comm: NcclComm,
  rank: number,
  world: number,
  x: Tensor,
  out: Tensor,
  send: (r: number) => [number, number],
  recv: (r: number) => [number, number],
  stream: Stream,
): void {
  const [from, n] = send(rank);
  const [to] = recv(rank);
  copyDeviceToDevice(out.ptr + BigInt(to), x.ptr + BigInt(from), n, stream);
  if (world === 1) return;
  comm.group(() => {
    for (let i = 1; i < world; i++) {
      // Rank-rotated, so that not every rank starts with rank 0.
      const r = (rank + i) % world;
      const [sa, sn] = send(r);
      const [ra, rn] = recv(r);
      if (sn > 0) comm.send(bytes(x, sa, sn), r, stream);
      if (rn > 0) comm.recv(bytes(out, ra, rn), r, stream);
    }
  });
}
