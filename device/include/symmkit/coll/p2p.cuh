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
// Algorithm ll: for small messages, no signal and no round trip on the way. The sender stores the message
// as LL lines (coll/mailbox.cuh's LL: a 16-byte line carries 8 payload bytes as two 64-bit words, flag << 32
// | 4 bytes, each single-copy atomic) straight into the receiver's LL buffers, and is done; the receiver's
// threads poll their own lines in local memory until each carries the chunk's flag. A message goes in
// chunks of kLlChunk payload bytes (at least one); the pair's chunks are numbered j = 0, 1, ... in the
// order both sides make them (counts in each rank's pad, below), chunk j uses buffer j & 1 of the sender's
// two in the receiver's inbox (after put's chunks: at 2 world chunk + (2 s + (j & 1)) kLlBuffer) and
// carries flag 1 + j mod (2^32 - 1): never 0 (the inbox starts zeroed), and unlike the flag of whatever
// earlier chunk left lines there (unless a line went unwritten for 2^32 - 1 of the pair's chunks in that
// buffer, about 8.6e9 chunks: not guarded). A message's first chunk also carries its call word as a line at
// 2 kLlChunk of the buffer (the header), which the receiver's first thread checks (kMismatch, as the
// mailbox does). Flow control: once every receiving block has copied chunk j out, the last raises the
// sender's acked count to j + 1 (red.max); the sender writes chunk j >= 2 only once acked >= j - 1, so it
// never overwrites a buffer still being read, and is at most two chunks ahead.
// The counts live in each rank's pad after put's slots (kLl*): acked[r] (raised by r), sent[p] and
// received[s] (chunks of the pair so far, advanced by the side's last block at the end of a message, read
// by the next one), and the blocks of the running send, and of each of the last four chunks received
// (kLlRounds), that are done.
// Being counts in memory, not arguments, they let a captured send or receive replay. A message matched
// with another algorithm's is caught (kMismatch) by the receiver's first wait: an ll receiver sees put's
// or copy_engine's first ready signal in its pad, a put receiver sees an ll header at the pair's next ll
// chunk. (copy_engine's receiver, a one-thread signal kernel, does not look: matched with an ll sender,
// it waits until its deadline and names the peer.)
//
// One launch's two sides may differ (p2p_ll_put sends by ll and receives by put, p2p_put_ll the reverse):
// each side of a message follows that message, so a sendRecv matched by the peer's separate send and recv
// pairs each direction's algorithm alike.
//
// allToAll's ll (p2p_ll_all_to_all) sends each peer its chunk as that pair's next ll message, so the
// pairs' counts and buffers serve both ops, in the order both ranks make their calls.
//
// Algorithm copy_engine: the data moves by copies the host enqueues (the receiver's copy engine reads the
// sender's staging buffer over NVLink), and this header only signals, with one thread (p2p_ce_signal):
// the sender copies chunk i of x into half i & 1 of its staging buffer, then puts ready[s][0][i & 1] in
// the receiver's pad (release); the receiver waits for it (acquire), copies the half into out, then puts
// ack[r][0][i & 1] in the sender's pad; the sender waits for the ack of chunk i - 2 before restaging that
// half, and for the last two at the end, so a send completes once the receiver has the message. The same
// slots as put's block 0, under the per-pair message order and fingerprints (another kind), so a put
// matched with a copy_engine message is caught as a mismatch.
//
// The receiver takes chunk i on stream i mod 2 of two (its wait, copy and ack), so one chunk's wait is
// queued while the other copies; each stream keeps to its parity's slots.
// allToAll's copy_engine (src/ops/exchange/all-to-all-ce.ts) signals every peer at once on the same
// slots (p2p_ce_signal_all, a thread per peer), round by round: a sender puts ready[s][0][k & 1] once
// round k's pieces are staged, a reader puts ack[r][0][k & 1] once it has copied them out; the host's
// schedule keeps each slot to one signal in flight, as send/recv's does, and leaves every slot idle.
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

/** ll's payload bytes per chunk: src/ops/exchange/programs.ts P2P_LL_CHUNK_BYTES. */
constexpr u64 kLlChunk = 256 << 10;
/** ll's buffer: a chunk's lines, then the header line. src/ops/exchange/programs.ts P2P_LL_BUFFER_BYTES. */
constexpr u64 kLlBuffer = 2 * kLlChunk + 16;
/** Lines a thread moves (or polls) at once. */
constexpr u32 kLlUnroll = 4;
/** ll's counts in the pad (u64 slots, after put's ready and ack slots), per peer: */
constexpr u32 kLlAcked = 2 * kAckBase;                // [r] chunks rank r copied out of ours (r raises it)
constexpr u32 kLlSent = kLlAcked + kMaxWorld;         // [p] chunks sent to p
constexpr u32 kLlReceived = kLlSent + kMaxWorld;      // [s] chunks received from s
constexpr u32 kLlSendDone = kLlReceived + kMaxWorld;  // [p] blocks of the running send to p that are done
constexpr u32 kLlRecvDone = kLlSendDone + kMaxWorld;  // [s][j mod kLlRounds] blocks done with chunk j from s
/** Counters of blocks done a receiver keeps per sender, chunk j counted in j mod kLlRounds. Two would not
 * do: a block with no lines in a message's partial last chunk j counts it as soon as it is done with
 * j - 1, maybe before a slower block has counted j - 2; sharing j - 2's counter, j's count would end j - 2's
 * early and acknowledge its buffer while still read, and the sender would write chunk j over it (the slow
 * block then waits for a flag that never comes). A block counts j only once done with j - 1, whose
 * lines came after j - 3 was counted whole (flow control), so j - 3's and j - 4's counters are free by then
 * (three would do; four keep the index a mask; test/ll-protocol.test.ts models it). That needs
 * every block to have lines in every full chunk: a side runs at most kLlChunk / 8 / kThreads blocks
 * (src/ops/exchange/p2p.ts P2P_LL_MAX_BLOCKS, checked in test/compile.test.ts). */
constexpr u32 kLlRounds = 4;
/** Slots the pad holds: src/ops/exchange/programs.ts P2P_PAD_BYTES / 8. */
constexpr u32 kPadSlots = kLlRecvDone + kLlRounds * kMaxWorld;
static_assert(kPadSlots == 576, "P2P_PAD_BYTES in src/ops/exchange/programs.ts is kPadSlots x 8");

__device__ __forceinline__ u64 ll_flag(u64 j) { return (1 + j % 0xffffffffull) << 32; }

/** Buffer `parity` of sender `src` in rank `owner`'s inbox. */
__device__ __forceinline__ u8* ll_buffer(const SymmView& v, u32 owner, u32 src, u64 parity, u64 chunk) {
  return static_cast<u8*>(v.buffers[owner]) + 2ull * v.world * chunk + (2ull * src + parity) * kLlBuffer;
}

/** Whether both words of a line carry `flag`; its payload into d. */
__device__ __forceinline__ bool ll_line(const u8* p, u64 flag, u64& d) {
  u64 lo, hi;
  ld_volatile_2x64(p, lo, hi);
  d = (lo & 0xffffffffull) | (hi << 32);
  return (lo & ~0xffffffffull) == flag && (hi & ~0xffffffffull) == flag;
}

/** A timeout's record of a line polled for `flag` (bounded_wait's seen): the flag awaited, and the flags
 * its two words held (low word's in the low half): the previous use's, another step's, or 0 (never written). */
__device__ __forceinline__ void ll_seen(const u8* p, u64 flag, u64& expected, u64& got) {
  u64 lo, hi;
  ld_volatile_2x64(p, lo, hi);
  expected = flag >> 32;
  got = (lo >> 32) | (hi & ~0xffffffffull);
}

__device__ __forceinline__ void st_ll_line(u8* p, u64 flag, u64 d) { st_volatile_2x64(p, flag | (d & 0xffffffffull), flag | (d >> 32)); }

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

/** The first wait of put's receiving side, for the ready signal of the message's first
 * stripe: as wait_signal, and it also gives up (kMismatch) where the peer sent an ll message instead,
 * whose header would be at the pair's next ll chunk. */
__device__ __forceinline__ void wait_first_ready(const SymmView& v, const WaitEnv& env, u32 peer, u64 word, u64 chunk) {
  u64* ready = v.pads[v.rank] + slot(peer, 0, 0);
  const u64 j = *reinterpret_cast<volatile u64*>(v.pads[v.rank] + kLlReceived + peer);
  const u8* header = ll_buffer(v, v.rank, peer, j & 1, chunk) + 2 * kLlChunk;
  bounded_wait(env, peer, word, [&] {
    const u64 seen = cas_sys<Order::Acquire>(ready, word, 0ull);
    if (seen != 0ull && seen != word) give_up(env, peer, word, 0, kMismatch, word, seen);
    u64 got;
    if (seen == 0ull && ll_line(header, ll_flag(j), got)) give_up(env, peer, word, 0, kMismatch, word, got);
    return seen == word;
  });
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
    if (threadIdx.x == 0) {
      if (i == 0 && b == 0) wait_first_ready(v, env, peer, word, chunk);
      else wait_signal<Order::Acquire>(v.pads[v.rank] + slot(peer, b, parity), env, peer, word);
    }
    __syncthreads();
    u64 at;
    const u64 n = stripe_bytes(bytes, chunk, stripe, i, b, &at);
    block_copy(out + at, inbox + parity * chunk + b * stripe, n);
    __syncthreads();
    if (threadIdx.x == 0) put_signal<Order::Release>(v.pads[peer] + kAckBase + slot(v.rank, b, parity), env, peer, word);
  }
}


/** The last of a side's `blocks` blocks to call this (thread 0 of each, after __syncthreads) gets true.
 * One atomic counts and, for the last, wraps the count back to 0 (in the slot's low word): a reset apart
 * from the count could land after the acknowledgement that lets the next chunk's first block count. */
__device__ __forceinline__ bool last_block(u64* done, u32 blocks) {
  return atomicInc(reinterpret_cast<unsigned int*>(done), blocks - 1) == blocks - 1;
}

/** What block b of a side's `blocks` works out first for a message of `bytes`: the pair's chunk count
 * before it (its pad slot `count`), the message's chunks, and this thread's place among the side's. */
struct LlSide {
  WaitEnv env;
  u64* pad;
  u64 first;
  u64 chunks;
  u64 threads;
  u64 t;
  __device__ __forceinline__ LlSide(const SymmView& v, u32 count, u64 bytes, u32 b, u32 blocks)
      : env(v.wait_env()),
        pad(v.pads[v.rank]),
        first(*reinterpret_cast<volatile u64*>(pad + count)),
        chunks(chunk_count(bytes, kLlChunk)),
        threads(static_cast<u64>(blocks) * kThreads),
        t(static_cast<u64>(b) * kThreads + threadIdx.x) {}
  /** Lines of chunk i of a message of `bytes` (the last may be partial), and its payload bytes in n. */
  __device__ __forceinline__ u64 lines(u64 bytes, u64 i, u64& n) const {
    n = min(kLlChunk, bytes - min(bytes, i * kLlChunk));
    return (n + 7) / 8;
  }
};

/** Block b's part of sending x (`bytes`) to `peer` by ll. */
__device__ __forceinline__ void ll_send_part(const SymmView& v, const u8* x, u64 bytes, u32 peer, u32 b, u32 blocks, u64 chunk,
                                             u64 word) {
  const LlSide side(v, kLlSent + peer, bytes, b, blocks);
  for (u64 i = 0; i < side.chunks; ++i) {
    const u64 j = side.first + i;
    if (j >= 2) {
      // Relaxed: the ack orders no data, only the receiver's reads (done) before these writes.
      if (threadIdx.x == 0)
        bounded_wait(side.env, peer, word, [&] { return *reinterpret_cast<volatile u64*>(side.pad + kLlAcked + peer) >= j - 1; });
      __syncthreads();
    }
    u8* buf = ll_buffer(v, peer, v.rank, j & 1, chunk);
    const u64 flag = ll_flag(j);
    if (i == 0 && side.t == 0) st_ll_line(buf + 2 * kLlChunk, flag, word);
    u64 n;
    const u64 lines = side.lines(bytes, i, n);
    const u8* src = x + i * kLlChunk;
    for (u64 l = side.t; l < lines; l += kLlUnroll * side.threads) {
      u64 d[kLlUnroll];
#pragma unroll
      for (u32 u = 0; u < kLlUnroll; ++u)
        if (l + u * side.threads < lines) d[u] = load_line(src, l + u * side.threads, n);
#pragma unroll
      for (u32 u = 0; u < kLlUnroll; ++u)
        if (l + u * side.threads < lines) st_ll_line(buf + 16 * (l + u * side.threads), flag, d[u]);
    }
  }
  // Every block read the count before the message is counted.
  __syncthreads();
  if (threadIdx.x == 0 && last_block(side.pad + kLlSendDone + peer, blocks))
    *reinterpret_cast<volatile u64*>(side.pad + kLlSent + peer) = side.first + side.chunks;
}

/** Block b's part of receiving into out (`bytes`) from `peer` by ll. */
__device__ __forceinline__ void ll_recv_part(const SymmView& v, u8* out, u64 bytes, u32 peer, u32 b, u32 blocks, u64 chunk,
                                             u64 word) {
  const LlSide side(v, kLlReceived + peer, bytes, b, blocks);
  for (u64 i = 0; i < side.chunks; ++i) {
    const u64 j = side.first + i;
    const u8* buf = ll_buffer(v, v.rank, peer, j & 1, chunk);
    const u64 flag = ll_flag(j);
    if (i == 0 && side.t == 0) {
      // A put or copy_engine message from the peer where this one is expected signals its first stripe
      // instead: caught here. A next message's signal comes after this one's header (stream order, and
      // the put is a release), so with the signal seen (and a fence) a header still missing never will be.
      u64 got = 0;
      bounded_wait(
          side.env, peer, word,
          [&] {
            if (ll_line(buf + 2 * kLlChunk, flag, got)) return true;
            const u64 ready = *reinterpret_cast<volatile u64*>(side.pad + slot(peer, 0, 0));
            if (ready == 0ull) return false;
            fence_acq_rel_sys();
            if (!ll_line(buf + 2 * kLlChunk, flag, got)) give_up(side.env, peer, word, 0, kMismatch, word, ready);
            return true;
          },
          [&](u64& e, u64& g) { ll_seen(buf + 2 * kLlChunk, flag, e, g); });
      if (got != word) give_up(side.env, peer, word, 0, kMismatch, word, got);
    }
    u64 n;
    const u64 lines = side.lines(bytes, i, n);
    u8* dst = out + i * kLlChunk;
    for (u64 l = side.t; l < lines; l += kLlUnroll * side.threads) {
      u64 d[kLlUnroll];
      // Every line of the group polled each round, so that their loads are in flight together.
      bounded_wait(
          side.env, peer, word,
          [&] {
            bool all = true;
#pragma unroll
            for (u32 u = 0; u < kLlUnroll; ++u)
              if (l + u * side.threads < lines) all = ll_line(buf + 16 * (l + u * side.threads), flag, d[u]) && all;
            return all;
          },
          [&](u64& e, u64& g) {
            for (u32 u = 0; u < kLlUnroll; ++u) {
              const u8* p = buf + 16 * (l + u * side.threads);
              u64 payload;
              if (l + u * side.threads < lines && !ll_line(p, flag, payload)) return ll_seen(p, flag, e, g);
            }
          });
#pragma unroll
      for (u32 u = 0; u < kLlUnroll; ++u)
        if (l + u * side.threads < lines) store_line(dst, l + u * side.threads, n, d[u]);
    }
    // The block's reads of the buffer are done; the last block frees it for chunk j + 2. Every block counts
    // every chunk, lines or not, so chunk j counted whole means j - 1 was too, whatever the acknowledgement
    // of a later chunk lets the sender write. Relaxed: every read of it returned its value before the
    // barrier (each was checked for the flag), so no later write of the sender's can reach one; a release
    // would cost a system-scope fence per chunk.
    __syncthreads();
    if (threadIdx.x == 0 && last_block(side.pad + kLlRecvDone + kLlRounds * peer + j % kLlRounds, blocks)) {
      if (i + 1 == side.chunks) *reinterpret_cast<volatile u64*>(side.pad + kLlReceived + peer) = side.first + side.chunks;
      red_max_relaxed_sys(v.pads[peer] + kLlAcked + v.rank, j + 1);
    }
  }
}

/**
 * Blocks [0, send_blocks) send x (send_bytes) to send_peer, blocks from send_blocks receive out
 * (recv_bytes, recv_blocks of them) from recv_peer: send, recv and sendRecv are one of these kernels with
 * one side empty or both (sendRecv's two sides run at once, so two ranks exchanging cannot deadlock).
 * Each side by put or ll (SendLl, RecvLl), so that a side's algorithm follows its own message's size
 * under auto, as the peer's matching side does whether it calls send, recv or sendRecv. `chunk` is put's
 * (it places the LL buffers after its own).
 */
template <bool SendLl, bool RecvLl>
__device__ __forceinline__ void p2p_sides(const SymmView& v, const u8* x, u64 send_bytes, u32 send_peer, u32 send_blocks,
                                          u64 send_word, u8* out, u64 recv_bytes, u32 recv_peer, u32 recv_blocks,
                                          u64 recv_word, u64 chunk) {
  if (blockIdx.x < send_blocks) {
    if constexpr (SendLl) ll_send_part(v, x, send_bytes, send_peer, blockIdx.x, send_blocks, chunk, send_word);
    else send_part(v, x, send_bytes, send_peer, blockIdx.x, send_blocks, chunk, send_word);
  } else {
    const u32 b = blockIdx.x - send_blocks;
    if constexpr (RecvLl) ll_recv_part(v, out, recv_bytes, recv_peer, b, recv_blocks, chunk, recv_word);
    else recv_part(v, out, recv_bytes, recv_peer, b, recv_blocks, chunk, recv_word);
  }
}

#define SYMMKIT_P2P_KERNEL(name, bounds, send_ll, recv_ll)                                                              \
  __global__ void bounds name(const __grid_constant__ SymmView v, const u8* x, u64 send_bytes, u32 send_peer,        \
                              u32 send_blocks, const CallTag send_tag, u8* out, u64 recv_bytes, u32 recv_peer,        \
                              u32 recv_blocks, const CallTag recv_tag, u64 chunk) {                                   \
    p2p_sides<send_ll, recv_ll>(v, x, send_bytes, send_peer, send_blocks, send_tag.word, out, recv_bytes, recv_peer,    \
                                recv_blocks, recv_tag.word, chunk);                                                     \
  }
// A kernel with an ll side asks for at least one block per SM: without it ptxas keeps to 64 registers and
// spills the polled lines.
SYMMKIT_P2P_KERNEL(p2p_put, __launch_bounds__(kThreads), false, false)
SYMMKIT_P2P_KERNEL(p2p_ll, __launch_bounds__(kThreads, 1), true, true)
SYMMKIT_P2P_KERNEL(p2p_ll_put, __launch_bounds__(kThreads, 1), true, false)
SYMMKIT_P2P_KERNEL(p2p_put_ll, __launch_bounds__(kThreads, 1), false, true)
#undef SYMMKIT_P2P_KERNEL

/**
 * allToAll by ll: chunk p of x (`bytes` each) goes to rank p as the pair's next ll message, chunk s of out
 * comes from rank s's, this rank's own chunk is copied, all under the call's word. Blocks come in 2 W - 1
 * groups of `blocks`: group k < W - 1 sends to rank + 1 + k, group W - 1 + k receives from rank - 1 - k
 * (so that pairs meet in the same order on both ranks), the last copies. The grid is kept to one block per
 * SM by the host, so every side runs at once (a sender waiting for an acknowledgement never holds the SM
 * its peer's receiver needs). That matters past two chunks a pair only: until then a sender waits on
 * earlier calls' acknowledgements alone, which is why auto stops there (another stream's kernels may hold
 * SMs).
 */
__global__ void __launch_bounds__(kThreads, 1) p2p_ll_all_to_all(const __grid_constant__ SymmView v, const u8* x, u8* out,
                                                              u64 bytes, u32 blocks, const CallTag tag, u64 chunk) {
  const u32 w = v.world;
  const u32 group = blockIdx.x / blocks;
  const u32 b = blockIdx.x % blocks;
  if (group + 1 < w) {
    const u32 peer = (v.rank + 1 + group) % w;
    ll_send_part(v, x + peer * bytes, bytes, peer, b, blocks, chunk, tag.word);
  } else if (group + 2 < 2 * w) {
    const u32 peer = (v.rank + w - 1 - (group - (w - 1))) % w;
    ll_recv_part(v, out + peer * bytes, bytes, peer, b, blocks, chunk, tag.word);
  } else {
    copy_lanes(out + v.rank * bytes, x + v.rank * bytes, bytes, b * kThreads + threadIdx.x, blocks * kThreads);
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

/** W - 1 threads, thread t for peer p = (rank + 1 + t) mod W: puts a signal in p's pad at put_base +
 * slot(rank, 0, put_parity) (release; put_base kNone: none), then waits for p's signal in this rank's pad
 * at wait_base + slot(p, 0, q) (acquire) for each parity q in the mask wait_parities (bit q). allToAll
 * copy_engine's steps: each thread's put and waits are its own peer's, so no thread waits on another. The
 * put must come first (p2p_ce_signal waits first): a reader acknowledges round k - 2 and then waits for
 * round k, which the peer stages only once that acknowledgement came. */
__global__ void p2p_ce_signal_all(const __grid_constant__ SymmView v, u32 put_base, u32 put_parity, u32 wait_base,
                                  u32 wait_parities, const CallTag tag) {
  if (threadIdx.x + 1 >= v.world) return;
  const u32 peer = (v.rank + 1 + threadIdx.x) % v.world;
  const WaitEnv env = v.wait_env();
  if (put_base != kNone) put_signal<Order::Release>(v.pads[peer] + put_base + slot(v.rank, 0, put_parity), env, peer, tag.word);
  for (u32 q = 0; q < 2; ++q)
    if ((wait_parities >> q) & 1u) wait_signal<Order::Acquire>(v.pads[v.rank] + wait_base + slot(peer, 0, q), env, peer, tag.word);
}

}  // namespace p2p
}  // namespace symmkit
