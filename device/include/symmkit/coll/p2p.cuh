// symmkit/coll/p2p.cuh: send and receive on symmetric memory (algorithm put): the sender's blocks store the
// message into the receiver's inbox over NVLink and signal each piece; the receiver's blocks copy it out
// and acknowledge, so the sender may reuse the piece.
//
// Contract. Every rank's inbox (a symmetric buffer of its own) holds, for each sender s, two chunk
// buffers of `chunk` bytes at (2 s + parity) x chunk. A message of `bytes` goes in chunks of `chunk`
// bytes (at least one, so an empty message still meets its receiver); chunk i uses buffer i & 1. Block b
// of the `blocks` a side runs (both sides compute the same count from the size) moves stripe b of each
// chunk: bytes [b x stripe, (b + 1) x stripe), stripe = the first chunk's bytes / blocks rounded up to a
// multiple of 16 (chunk / blocks for a message of a chunk or more). Signals
// (sync/signal.cuh, one-slot, carrying the message's call word, sync/call_tag.cuh; messages have no shape
// word) in each rank's inbox pad:
//   ready[s][b][parity] at ((s x kMaxBlocks) + b) x 2 + parity: sender s put stripe b of a chunk here;
//   ack[r][b][parity] at kAckBase + the same: receiver r copied it out.
// Sender, per block: before writing chunk i >= 2 it waits for the ack of chunk i - 2 (same buffer);
// writes its stripe; __syncthreads; puts ready (release, system scope). At the end it waits for the
// acks it has not consumed (acquire: the receiver's reads of the inbox come before the next message's
// stores), so the kernel completes only once the receiver has the whole message: every slot is idle
// again, and the next message starts from buffer 0.
// Receiver, per block: waits for ready (acquire), copies the stripe to out, __syncthreads, puts ack
// (release: its reads of the inbox come before the sender's next writes).
// A one-slot put spins until the slot's previous signal was consumed, so neither side overruns the
// other; every wait is bounded and names the peer; a message of another size or order carries another
// fingerprint and is caught (kMismatch). Slots are idle after every message: graph-replayable.
//
// Algorithm copy_engine: the data moves by copies the host enqueues (the receiver's copy engine reads the
// sender's staging buffer over NVLink), and this header only signals, with one thread (p2p_ce_signal):
// the sender copies chunk i of x into half i & 1 of its staging buffer, then puts ready[s][0][i & 1] in
// the receiver's pad (release); the receiver waits for it (acquire), copies the half into out, then puts
// ack[r][0][i & 1] in the sender's pad; the sender waits for the ack of chunk i - 2 before restaging that
// half, and for the last two at the end, so a send completes once the receiver has the message. The same
// slots as put's block 0, under the per-pair message order and fingerprints (another kind), so a put
// matched with a copy_engine message is caught as a mismatch.
#pragma once
#include "symmkit/core/copy.cuh"
#include "symmkit/sync/barrier.cuh"

namespace symmkit {
namespace p2p {

constexpr u32 kThreads = 512;
/** Most blocks one side of a message runs (the pad holds their slots). src/ops/exchange/p2p.ts P2P_MAX_BLOCKS. */
constexpr u32 kMaxBlocks = 16;
/** Where the ack slots start in a pad: after every sender's ready slots. */
constexpr u32 kAckBase = kMaxWorld * kMaxBlocks * 2;

__device__ __forceinline__ u32 slot(u32 rank, u32 block, u32 parity) { return (rank * kMaxBlocks + block) * 2 + parity; }

/** dst[0, n) = src[0, n) by the block. */
__device__ __forceinline__ void block_copy(u8* dst, const u8* src, u64 n) { copy_lanes(dst, src, n, threadIdx.x, kThreads); }

/** A stripe: the first chunk's bytes split over the blocks, rounded up to 16 (so a message under a chunk
 * uses every block; a full chunk gives chunk / blocks). Both sides compute it from the size alone. */
__device__ __forceinline__ u64 stripe_of(u64 bytes, u64 chunk, u32 blocks) {
  const u64 first = min(bytes, chunk);
  return max(static_cast<u64>(16), ((first + blocks - 1) / blocks + 15) & ~static_cast<u64>(15));
}

/** Bytes of stripe b of chunk i in a message of `bytes`, and where it starts. */
__device__ __forceinline__ u64 stripe_bytes(u64 bytes, u64 chunk, u64 stripe, u64 i, u32 b, u64* at) {
  *at = i * chunk + b * stripe;
  return *at >= bytes ? 0 : min(stripe, bytes - *at);
}

__device__ __forceinline__ u64 chunk_count(u64 bytes, u64 chunk) { return bytes == 0 ? 1 : (bytes + chunk - 1) / chunk; }

/** Block b's part of sending x (`bytes`) to `peer`. */
__device__ __forceinline__ void send_part(const SymmView& v, const u8* x, u64 bytes, u32 peer, u32 b, u32 blocks, u64 chunk,
                                          u64 word) {
  const WaitEnv env = v.wait_env();
  const u64 stripe = stripe_of(bytes, chunk, blocks);
  const u64 chunks = chunk_count(bytes, chunk);
  u8* inbox = static_cast<u8*>(v.buffers[peer]) + 2 * static_cast<u64>(v.rank) * chunk;
  u64* ack = v.pads[v.rank] + kAckBase;
  for (u64 i = 0; i < chunks; ++i) {
    const u32 parity = static_cast<u32>(i & 1);
    if (i >= 2) {
      if (threadIdx.x == 0) wait_signal<Order::Acquire>(ack + slot(peer, b, parity), env, peer, word);
      __syncthreads();
    }
    u64 at;
    const u64 n = stripe_bytes(bytes, chunk, stripe, i, b, &at);
    block_copy(inbox + parity * chunk + b * stripe, x + at, n);
    __syncthreads();
    if (threadIdx.x == 0) put_signal<Order::Release>(v.pads[peer] + slot(v.rank, b, parity), env, peer, word);
  }
  if (threadIdx.x == 0)
    for (u64 i = chunks >= 2 ? chunks - 2 : 0; i < chunks; ++i)
      wait_signal<Order::Acquire>(ack + slot(peer, b, static_cast<u32>(i & 1)), env, peer, word);
}

/** Block b's part of receiving into out (`bytes`) from `peer`. */
__device__ __forceinline__ void recv_part(const SymmView& v, u8* out, u64 bytes, u32 peer, u32 b, u32 blocks, u64 chunk,
                                          u64 word) {
  const WaitEnv env = v.wait_env();
  const u64 stripe = stripe_of(bytes, chunk, blocks);
  const u64 chunks = chunk_count(bytes, chunk);
  const u8* inbox = static_cast<const u8*>(v.buffers[v.rank]) + 2 * static_cast<u64>(peer) * chunk;
  for (u64 i = 0; i < chunks; ++i) {
    const u32 parity = static_cast<u32>(i & 1);
    if (threadIdx.x == 0) wait_signal<Order::Acquire>(v.pads[v.rank] + slot(peer, b, parity), env, peer, word);
    __syncthreads();
    u64 at;
    const u64 n = stripe_bytes(bytes, chunk, stripe, i, b, &at);
    block_copy(out + at, inbox + parity * chunk + b * stripe, n);
    __syncthreads();
    if (threadIdx.x == 0) put_signal<Order::Release>(v.pads[peer] + kAckBase + slot(v.rank, b, parity), env, peer, word);
  }
}

/**
 * Blocks [0, send_blocks) send x (send_bytes) to send_peer, blocks from send_blocks receive out
 * (recv_bytes, recv_blocks of them) from recv_peer: send, recv and sendRecv are this kernel with one
 * side empty or both (sendRecv's two sides run at once, so two ranks exchanging cannot deadlock).
 */
__global__ void __launch_bounds__(kThreads) p2p_put(const __grid_constant__ SymmView v, const u8* x, u64 send_bytes,
                                                    u32 send_peer, u32 send_blocks, const CallTag send_tag, u8* out,
                                                    u64 recv_bytes, u32 recv_peer, u32 recv_blocks,
                                                    const CallTag recv_tag, u64 chunk) {
  if (blockIdx.x < send_blocks) {
    send_part(v, x, send_bytes, send_peer, blockIdx.x, send_blocks, chunk, send_tag.word);
  } else {
    recv_part(v, out, recv_bytes, recv_peer, blockIdx.x - send_blocks, recv_blocks, chunk, recv_tag.word);
  }
}

/** kNone as a peer: no wait, or no put. */
constexpr u32 kNone = 0xffffffffu;

/** One thread: waits for wait_peer's signal in this rank's pad at wait_slot (acquire), then puts one in
 * put_peer's pad at put_slot (release); either may be kNone. Algorithm copy_engine's steps. */
__global__ void p2p_ce_signal(const __grid_constant__ SymmView v, u32 wait_peer, u32 wait_slot, u32 put_peer, u32 put_slot,
                              const CallTag tag) {
  const WaitEnv env = v.wait_env();
  if (wait_peer != kNone) wait_signal<Order::Acquire>(v.pads[v.rank] + wait_slot, env, wait_peer, tag.word);
  if (put_peer != kNone) put_signal<Order::Release>(v.pads[put_peer] + put_slot, env, put_peer, tag.word);
}

}  // namespace p2p
}  // namespace symmkit
