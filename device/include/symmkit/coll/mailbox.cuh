// symmkit/coll/mailbox.cuh: collectives with no barrier, for small messages. Each rank pushes its data
// straight into a mailbox slot of every peer, and the data carries its own "arrived" mark, so a reader
// polls its own (local) memory and nobody waits for a round trip.
//
// Contract.
// Mailbox: a symmetric allocation, v.buffers[r] is rank r's, `cap` bytes per slot (a multiple of 16),
// the last 32 of each slot (of each 2 cap for LL) its header, the rest the payload:
//   Lamport region, [0, 3 W cap): buffers b = 0, 1, 2, each W slots; slot s of buffer b at (b W + s) cap.
//   LL region, from 3 W cap: buffers b = 0, 1, each W slots of 2 cap bytes.
// In buffer b of rank p, slot s is written only by rank s (what s sends p in one call), and read by p.
// MailboxState (device memory of this rank, zeroed at creation) counts the calls of each protocol; every
// rank makes the same calls in the same order, so the counts agree without any exchange. The last block
// of a call to finish bumps the count (end_call; the decode GEMM's blocks count as they start, once each
// has read it): the next call, later on the stream, sees it, and a CUDA graph replays correctly because
// the count lives in memory, not in kernel arguments.
//
// Lamport (all-reduce, reduce-scatter; bf16, f16, f32). The mailbox holds the sentinel (all bits set, a
// NaN in each of those types) wherever nothing has arrived. A sender stores its 16-byte groups with
// relaxed system-scope stores, an input element equal to the sentinel sent as the sentinel with its low
// bit flipped (still a NaN: sum keeps it NaN, max and min ignore NaNs either way); the reader polls each
// group of its slots with relaxed system-scope loads until no element is the sentinel, then reduces in
// rank order 0..W-1 in float32 (its own group from its input, cleaned the same way), so every rank gets
// bitwise the same result. Elements are single-copy atomic; a group may arrive in parts, so the check is
// per element. Call k uses buffer k % 3; between sending and waiting it also refills with the sentinel
// the slots that call k - 1 wrote into our buffer (k - 1) % 3 (their size is kept in the state).
// Why three buffers suffice: a rank finishes call k only after every peer's data of call k arrived, so
// while we are in call k a peer is at most in call k + 1 (buffer (k + 1) % 3, untouched by us). Buffer
// (k - 1) % 3 is next written in call k + 2, which a peer starts only after it saw our data of call k + 1,
// which we send after this kernel (and its refill) completed. The decode GEMM's all-reduce epilogue
// (gemm/decode_gemm.cuh) is one more Lamport call, counted in the same state, its partial the payload.
//
// LL (all-gather, any dtype, as bytes). Each 16-byte line carries 8 payload bytes as two 64-bit words
// (flag << 32 | 4 data bytes); 64-bit words are single-copy atomic, so a word whose flag is this call's
// flag holds this call's data. flag = 1 + (count mod (2^32 - 1)) is never 0 (the mailbox starts zeroed)
// and differs between calls k and k + 2, which share buffer k % 2: no refill is ever needed. Two buffers
// suffice for the reason above (a peer is at most one call ahead).
//
// Header: the sender's CallTag (sync/call_tag.cuh: its call word, then its shape word), written by its
// first thread into every slot it fills, before its payload, as two 16-byte groups (Lamport) or two lines
// (LL). One thread of the receiver waits for every peer's header and compares it with its own call's
// (Lamport: the grid's last thread, in a block that at small sizes has no row to reduce, so that the check
// is off the path of the blocks that do; LL: the first; the decode GEMM: one thread of CTA 0, beside the
// polls): a peer in another call (another size, dtype, op, algorithm, or a skipped call) makes it give up
// with a kMismatch record (kShapeMismatch for the same call with other shapes; sync/wait.cuh), which ends
// the kernel: the other threads do not wait for the check, and whatever they reduced of that call's data is
// never returned. (Where the grid's blocks are not all resident at once, e.g. SMs held by other work, the
// last block may start only after the others gave up: the mismatch then ends as a timeout naming the peer.)
// Lamport writes each word 15 bits per 16-bit half, so that no half is a sentinel, and
// refills the header with the payload; LL carries each word as a flagged line.
// Every poll is bounded (sync/wait.cuh) and names the peer it still waits for.
#pragma once
#include "symmkit/coll/collectives.cuh"
#include "symmkit/core/copy.cuh"

namespace symmkit {

/** Per-rank call counts (layout shared with the host: 48 bytes, zeroed at creation). */
struct MailboxState {
  u64 calls[2];  // by protocol: kLamport, kLL
  u64 used[3];   // Lamport: bytes per slot the call that used buffer b wrote
  u32 arrived;   // blocks of the running call that have finished
  u32 reserved;
};
static_assert(sizeof(MailboxState) == 48,
              "MailboxState layout is shared with the host (src/distributed/device-layouts.ts, test/device-layouts.test.ts)");
constexpr u32 kLamport = 0;
constexpr u32 kLL = 1;

__device__ __forceinline__ u64 read_calls(const MailboxState* s, u32 protocol) {
  return *reinterpret_cast<const volatile u64*>(&s->calls[protocol]);
}

/** The Lamport count and the three buffers' sizes, requested together (one round trip). */
struct LamportCounts {
  u64 call;
  u64 used[3];
};
__device__ __forceinline__ LamportCounts read_counts(const MailboxState* s) {
  LamportCounts k;
  k.call = read_calls(s, kLamport);
#pragma unroll
  for (u32 b = 0; b < 3; ++b) k.used[b] = s->used[b];
  return k;
}

/** One thread per block, once every thread of its block has read the count: counts the block, and the
 * last of the grid's `blocks` counts the call (and, for Lamport, how much it wrote into buffer `buf`) as
 * `call`, the count this call read at its start, plus one (nothing changes the count before the last
 * block counts: no read-modify-write, one round trip less at the end of the call). */
__device__ __forceinline__ void count_block(MailboxState* s, u32 protocol, u32 buf, u64 used, u32 blocks, u64 call) {
  if (atomicAdd(&s->arrived, 1u) == blocks - 1) {
    s->arrived = 0;
    if (protocol == kLamport) s->used[buf] = used;
    s->calls[protocol] = call + 1;
  }
}

/** The last block to finish counts the call (count_block), after a __syncthreads. */
__device__ __forceinline__ void end_call(MailboxState* s, u32 protocol, u32 buf, u64 used, u64 call) {
  __syncthreads();
  if (threadIdx.x == 0) count_block(s, protocol, buf, used, gridDim.x * gridDim.y * gridDim.z, call);
}

/** The sentinel (all bits set) of a 2- or 4-byte element type, lane-wise in 16-byte groups. */
template <typename T>
struct Sentinel {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Lamport collectives take 2- or 4-byte elements");
  __device__ __forceinline__ static bool in_word(u32 w) {
    if constexpr (sizeof(T) == 4) return w == ~0u;
    else return ((w & 0xffffu) == 0xffffu) | ((w >> 16) == 0xffffu);
  }
  __device__ __forceinline__ static bool any(const u32x4& v) {
    return in_word(v.x) | in_word(v.y) | in_word(v.z) | in_word(v.w);
  }
  __device__ __forceinline__ static u32 clean_word(u32 w) {
    if constexpr (sizeof(T) == 4) return w == ~0u ? w ^ 1u : w;
    else return w ^ ((w & 0xffffu) == 0xffffu ? 1u : 0u) ^ ((w >> 16) == 0xffffu ? 0x10000u : 0u);
  }
  __device__ __forceinline__ static u32x4 clean(const u32x4& v) {
    return u32x4{clean_word(v.x), clean_word(v.y), clean_word(v.z), clean_word(v.w)};
  }
};

/** Group i of src as 16 raw bytes, zero past element n. */
template <typename T>
__device__ __forceinline__ u32x4 load_group(const T* src, u64 i, u64 n) {
  const u64 e = i * Vec16<T>::N;
  const u32 c = group_size<T>(i, n);
  if (c == Vec16<T>::N && aligned16(src + e)) return ld_128(src + e);
  // Lane by lane with constant indices, so that the group stays in registers.
  u32 w[4] = {0, 0, 0, 0};
#pragma unroll
  for (u32 k = 0; k < Vec16<T>::N; ++k) {
    if (k >= c) continue;
    const u32 bits = sizeof(T) == 4 ? reinterpret_cast<const u32*>(src)[e + k] : reinterpret_cast<const u16*>(src)[e + k];
    w[k * sizeof(T) / 4] |= bits << (8 * (k * sizeof(T) % 4));
  }
  return u32x4{w[0], w[1], w[2], w[3]};
}

/** Polls every peer until arrived(r) holds for each (arrived loads peer r's data and checks it), all
 * peers in each round so that their loads are in flight together; a timeout names a peer still missing. */
template <u32 W, typename Arrived>
__device__ __forceinline__ void wait_for_peers(const SymmView& v, const WaitEnv& env, u64 phase, Arrived arrived) {
  u32 waiting = v.rank;
  bounded_wait(env, waiting, phase, [&] {
    bool all = true;
#pragma unroll
    for (u32 r = 0; r < W; ++r) {
      if (r != v.rank && !arrived(r)) {
        all = false;
        waiting = r;
      }
    }
    return all;
  });
}

/** Slot `src` of buffer `buf` in the mailbox at `owner_base` (a group of `world`). */
__device__ __forceinline__ u8* lamport_slot_at(void* owner_base, u32 world, u32 buf, u32 src, u64 cap) {
  return static_cast<u8*>(owner_base) + (static_cast<u64>(buf) * world + src) * cap;
}

template <u32 W>
__device__ __forceinline__ u8* lamport_slot(const SymmView& v, u32 owner, u32 buf, u32 src, u64 cap) {
  return lamport_slot_at(v.buffers[owner], W, buf, src, cap);
}

/** MAILBOX_HEADER_BYTES in src/distributed/device-layouts.ts: the call word's group (line), then the shape word's. */
constexpr u64 kHeaderBytes = 32;

/** A 64-bit word as a Lamport header group: 15 bits per 16-bit half, so that no half, and no word, is the
 * sentinel of any element type. */
__device__ __forceinline__ u32x4 lamport_header(u64 w) {
  const auto half = [&](u32 i) { return static_cast<u32>(w >> (15 * i)) & 0x7fffu; };
  return u32x4{half(0) | half(1) << 16, half(2) | half(3) << 16, half(4), 0u};
}

__device__ __forceinline__ u64 header_word(const u32x4& h) {
  const auto half = [](u32 x, u32 i) { return static_cast<u64>(x >> (16 * i) & 0x7fffu); };
  return half(h.x, 0) | half(h.x, 1) << 15 | half(h.y, 0) << 30 | half(h.y, 1) << 45 | half(h.z, 0) << 60;
}

/** Our header into slot `rank` of every peer's buffer `buf`, by one thread; `buffers[p]`: rank p's mailbox. */
__device__ __forceinline__ void send_headers_from(void* const* buffers, u32 world, u32 rank, u32 buf, u64 cap,
                                                  const CallTag& tag) {
  for (u32 k = 1; k < world; ++k) {
    u8* header = lamport_slot_at(buffers[(rank + k) % world], world, buf, rank, cap) + cap - kHeaderBytes;
    st_volatile_128(header, lamport_header(tag.word));
    st_volatile_128(header + 16, lamport_header(tag.shape));
  }
}

/** The first thread's part of sending (send_headers_from). */
template <u32 W>
__device__ __forceinline__ void send_headers(const SymmView& v, u32 buf, u64 cap, const CallTag& tag) {
  if (global_thread() == 0) send_headers_from(v.buffers, W, v.rank, buf, cap, tag);
}

/** Gives up if peer r's call word or shape word is not ours (see the contract). */
__device__ __forceinline__ void check_tag(const WaitEnv& env, u32 r, const CallTag& tag, u64 word, u64 shape) {
  if (word != tag.word) give_up(env, r, tag.word, 0, kMismatch, tag.word, word);
  if (shape != tag.shape) give_up(env, r, tag.word, 0, kShapeMismatch, tag.shape, shape);
}

/** One thread: every peer's header in this rank's mailbox `own` (of a group of `world`) has arrived and names
 * this call, peer by peer (check_headers polls them together, for the collective kernels). */
__device__ __forceinline__ void check_headers_from(void* own, u32 world, u32 rank, const WaitEnv& env, u32 buf, u64 cap,
                                                   const CallTag& tag) {
  for (u32 r = 0; r < world; ++r) {
    if (r == rank) continue;
    const u8* header = lamport_slot_at(own, world, buf, r, cap) + cap - kHeaderBytes;
    u32x4 h[2];
    bounded_wait(env, r, tag.word, [&] {
      h[0] = ld_volatile_128(header);
      h[1] = ld_volatile_128(header + 16);
      return !Sentinel<u16>::any(h[0]) && !Sentinel<u16>::any(h[1]);
    });
    check_tag(env, r, tag, header_word(h[0]), header_word(h[1]));
  }
}

/** The grid's last thread: every peer's header has arrived and names this call (see the contract). */
template <typename T, u32 W>
__device__ __forceinline__ void check_headers(const SymmView& v, const WaitEnv& env, u32 buf, u64 cap, const CallTag& tag) {
  if (global_thread() != grid_threads() - 1) return;
  u32x4 h[W][2];
  wait_for_peers<W>(v, env, tag.word, [&](u32 r) {
    const u8* header = lamport_slot<W>(v, v.rank, buf, r, cap) + cap - kHeaderBytes;
    h[r][0] = ld_volatile_128(header);
    h[r][1] = ld_volatile_128(header + 16);
    return !Sentinel<T>::any(h[r][0]) && !Sentinel<T>::any(h[r][1]);
  });
#pragma unroll
  for (u32 r = 0; r < W; ++r)
    if (r != v.rank) check_tag(env, r, tag, header_word(h[r][0]), header_word(h[r][1]));
}

/** refill's work, by threads `thread` of `threads`: `own` is this rank's mailbox, of a group of `world`;
 * `used_prev`: s->used[prev], read beforehand (read_counts). */
__device__ __forceinline__ void refill_from(void* own, u32 world, u64 used_prev, u32 rank, u32 prev, u64 cap,
                                            u64 thread, u64 threads) {
  const u64 stale = used_prev / 16;
  const u32x4 ones{~0u, ~0u, ~0u, ~0u};
  for (u32 r = 0; r < world; ++r) {
    if (r == rank) continue;
    u8* slot = lamport_slot_at(own, world, prev, r, cap);
    for (u64 j = thread; j < stale; j += threads) st_128(slot + 16 * j, ones);
    if (thread == 0) {
      st_128(slot + cap - kHeaderBytes, ones);
      st_128(slot + cap - kHeaderBytes + 16, ones);
    }
  }
}
__device__ __forceinline__ void refill_from(void* own, u32 world, const MailboxState* s, u32 rank, u32 prev, u64 cap,
                                            u64 thread, u64 threads) {
  refill_from(own, world, s->used[prev], rank, prev, cap, thread, threads);
}

/** Refills with the sentinel what the previous call received, header included (see the contract).
 * Nobody writes there during this call, so it runs between sending and waiting, off the critical path. */
template <u32 W>
__device__ __forceinline__ void refill(const SymmView& v, u64 used_prev, u32 rank, u32 prev, u64 cap) {
  // From the grid's last thread down: blocks with no row of their own do it.
  refill_from(v.buffers[rank], W, used_prev, rank, prev, cap, grid_threads() - 1 - global_thread(), grid_threads());
}

/**
 * One call of a Lamport mailbox kernel (T: its element type, for the sentinel), its life as the contract
 * has it, written once for every kernel that speaks the protocol: made at the kernel's start (the buffer
 * the call's count picks, and the one the previous call used), open() sends this rank's header into every
 * peer's slot, the kernel pushes its payload to(p), arrived() refills the previous call's slots and waits
 * for every peer's header (another call's gives up), the kernel reads from(r) as groups arrive, and
 * close(used) counts the call once every block is done, with the bytes per slot it wrote (the next-but-one
 * call refills them).
 */
template <typename T, u32 W>
struct LamportCall {
  const SymmView& v;
  MailboxState* s;
  u64 cap;
  CallTag tag;
  u32 buf;
  u32 prev;
  u64 call;
  u64 u0, u1, u2;

  __device__ __forceinline__ LamportCall(const SymmView& view, MailboxState* state, u64 slot_bytes, const CallTag& t)
      : LamportCall(view, state, slot_bytes, t, read_counts(state)) {}
  /** With the call count and sizes already requested (read_counts), so that loads issued between overlap them. */
  __device__ __forceinline__ LamportCall(const SymmView& view, MailboxState* state, u64 slot_bytes, const CallTag& t,
                                         const LamportCounts& k)
      : v(view), s(state), cap(slot_bytes), tag(t), call(k.call), u0(k.used[0]), u1(k.used[1]), u2(k.used[2]) {
    buf = static_cast<u32>(call % 3);
    prev = static_cast<u32>((call + 2) % 3);
  }
  __device__ __forceinline__ u64 used_prev() const { return prev == 0 ? u0 : prev == 1 ? u1 : u2; }
  /** This rank's slot in peer `owner`'s buffer: what it sends `owner` in this call. */
  __device__ __forceinline__ u8* to(u32 owner) const { return lamport_slot<W>(v, owner, buf, v.rank, cap); }
  /** Rank `src`'s slot in this rank's buffer: what `src` sends this rank. */
  __device__ __forceinline__ const u8* from(u32 src) const { return lamport_slot<W>(v, v.rank, buf, src, cap); }
  __device__ __forceinline__ void open() const { send_headers<W>(v, buf, cap, tag); }
  __device__ __forceinline__ void arrived(const WaitEnv& env) const {
    refill<W>(v, used_prev(), v.rank, prev, cap);
    check_headers<T, W>(v, env, buf, cap, tag);
  }
  __device__ __forceinline__ void close(u64 used) const { end_call(s, kLamport, buf, used, call); }
};

/** Waits until every peer's group at byte `at` of its slot in our buffer has arrived, then reduces them and
 * ours (`mine`) in rank order into f. */
template <typename T, typename Op, u32 W>
__device__ __forceinline__ void reduce_arrived(const LamportCall<T, W>& c, const WaitEnv& env, u64 at, const u32x4& mine,
                                               float (&f)[Vec16<T>::N]) {
  u32x4 raw[W];
  wait_for_peers<W>(c.v, env, c.tag.word, [&](u32 r) {
    raw[r] = ld_volatile_128(c.from(r) + at);
    return !Sentinel<T>::any(raw[r]);
  });
#pragma unroll
  for (u32 r = 0; r < W; ++r) raw[r] = r == c.v.rank ? mine : raw[r];
  reduce_ranks<T, Op, W>(raw, f);
}

/** Scatter: n elements per destination, rank p gets elements [p n, p n + n) of every input (reduce-scatter);
 * otherwise every rank gets all n (all-reduce). */
template <typename T, typename Op, u32 W, bool Scatter>
__device__ __forceinline__ void lamport_reduce(const SymmView& v, const T* in, T* out, u64 n, MailboxState* s, u64 cap,
                                               const CallTag& tag) {
  const LamportCall<T, W> c(v, s, cap, tag);
  const u32 rank = v.rank;
  const u64 groups = ceil_div(n, Vec16<T>::N);
  c.open();
  for (u64 i = global_thread(); i < groups; i += grid_threads()) {
    u32x4 x;
    if constexpr (!Scatter) x = Sentinel<T>::clean(load_group(in, i, n));
#pragma unroll
    for (u32 k = 1; k < W; ++k) {
      const u32 p = (rank + k) % W;
      if constexpr (Scatter) x = Sentinel<T>::clean(load_group(in + p * n, i, n));
      st_volatile_128(c.to(p) + 16 * i, x);
    }
  }
  const WaitEnv env = v.wait_env();
  c.arrived(env);
  const T* own = in + (Scatter ? rank * n : 0);
  for (u64 i = global_thread(); i < groups; i += grid_threads()) {
    float f[Vec16<T>::N];
    reduce_arrived<T, Op, W>(c, env, 16 * i, Sentinel<T>::clean(load_group(own, i, n)), f);
    store_group(out, i, f, group_size<T>(i, n));
  }
  c.close(groups * 16);
}

template <typename T, typename Op, u32 W>
__global__ void lamport_all_reduce(const __grid_constant__ SymmView v, const T* in, T* out, u64 n, MailboxState* s, u64 cap,
                                   const CallTag tag) {
  lamport_reduce<T, Op, W, false>(v, in, out, n, s, cap, tag);
}

/** out[0, n) = op over ranks of in[rank n, rank n + n); the input is W n elements. */
template <typename T, typename Op, u32 W>
__global__ void lamport_reduce_scatter(const __grid_constant__ SymmView v, const T* in, T* out, u64 n, MailboxState* s,
                                       u64 cap, const CallTag tag) {
  lamport_reduce<T, Op, W, true>(v, in, out, n, s, cap, tag);
}

/**
 * Two-shot all-reduce through the Lamport mailbox: groups are split into W chunks of `chunk` groups, rank
 * p owning chunk p. Each rank pushes chunk p of its input into slot [0, chunk) of rank p (reduce-scatter),
 * reduces its own chunk in rank order as soon as each group has arrived, and pushes the result into slot
 * [chunk, 2 chunk) of every peer (all-gather), keeping the bits it sends as its own output; then it
 * copies the peers' chunks out as they arrive. No step waits for more than the groups it needs, so there
 * is no barrier; the grid fits on the GPU at once (the host keeps it to one block per SM), so every
 * group's sender is running.
 */
template <typename T, typename Op, u32 W>
__global__ void lamport_two_shot_all_reduce(const __grid_constant__ SymmView v, const T* in, T* out, u64 n, MailboxState* s,
                                            u64 cap, const CallTag tag) {
  const LamportCall<T, W> c(v, s, cap, tag);
  const u32 rank = v.rank;
  const u64 groups = ceil_div(n, Vec16<T>::N);
  const u64 chunk = ceil_div(groups, W);
  const u64 ag = 16 * chunk;  // where the all-gather half of a slot starts
  c.open();
  for (u64 j = global_thread(); j < chunk; j += grid_threads()) {
#pragma unroll
    for (u32 k = 1; k < W; ++k) {
      const u32 p = (rank + k) % W;
      const u64 i = p * chunk + j;
      if (i < groups) st_volatile_128(c.to(p) + 16 * j, Sentinel<T>::clean(load_group(in, i, n)));
    }
  }
  const WaitEnv env = v.wait_env();
  c.arrived(env);
  for (u64 j = global_thread(); j < chunk && rank * chunk + j < groups; j += grid_threads()) {
    const u64 i = rank * chunk + j;
    float f[Vec16<T>::N];
    reduce_arrived<T, Op, W>(c, env, 16 * j, Sentinel<T>::clean(load_group(in, i, n)), f);
    // What every rank stores: the rounded group, cleaned of the sentinel like any other sent value.
    const u32x4 sum = Sentinel<T>::clean(Vec16<T>::pack(f));
#pragma unroll
    for (u32 k = 1; k < W; ++k) st_volatile_128(c.to((rank + k) % W) + ag + 16 * j, sum);
    Vec16<T>::unpack(sum, f);
    store_group(out, i, f, group_size<T>(i, n));
  }
  for (u64 j = global_thread(); j < chunk; j += grid_threads()) {
#pragma unroll
    for (u32 r = 0; r < W; ++r) {
      const u64 i = r * chunk + j;
      if (r == rank || i >= groups) continue;
      u32x4 got;
      const u8* from = c.from(r) + ag + 16 * j;
      bounded_wait(env, r, tag.word, [&] {
        got = ld_volatile_128(from);
        return !Sentinel<T>::any(got);
      });
      float f[Vec16<T>::N];
      Vec16<T>::unpack(got, f);
      store_group(out, i, f, group_size<T>(i, n));
    }
  }
  c.close(2 * ag);
}

/** out[r n_bytes, (r + 1) n_bytes) = rank r's input: any dtype, as bytes. */
template <u32 W>
__global__ void ll_all_gather(const __grid_constant__ SymmView v, const u8* in, u8* out, u64 n_bytes, MailboxState* s,
                              u64 cap, const CallTag tag) {
  const u64 call = read_calls(s, kLL);
  const u64 flag = (1 + call % 0xffffffffull) << 32;
  const u32 rank = v.rank;
  u8* const region = static_cast<u8*>(v.buffers[rank]) + 3 * W * cap;
  const u64 slots = (call % 2) * W;
  const u64 lines = ceil_div(n_bytes, 8);
  // The header: the last two lines of each slot, the call word and the shape word as their payload.
  const u64 header = 2 * cap - kHeaderBytes;
  if (global_thread() == 0) {
#pragma unroll
    for (u32 k = 1; k < W; ++k) {
      u8* slot = static_cast<u8*>(v.buffers[(rank + k) % W]) + 3 * W * cap + (slots + rank) * 2 * cap;
      st_volatile_2x64(slot + header, flag | (tag.word & 0xffffffffu), flag | (tag.word >> 32));
      st_volatile_2x64(slot + header + 16, flag | (tag.shape & 0xffffffffu), flag | (tag.shape >> 32));
    }
  }
  for (u64 i = global_thread(); i < lines; i += grid_threads()) {
    const u64 d = load_line(in, i, n_bytes);
#pragma unroll
    for (u32 k = 1; k < W; ++k) {
      const u32 p = (rank + k) % W;
      u8* slot = static_cast<u8*>(v.buffers[p]) + 3 * W * cap + (slots + rank) * 2 * cap;
      st_volatile_2x64(slot + 16 * i, flag | (d & 0xffffffffu), flag | (d >> 32));
    }
    store_line(out + rank * n_bytes, i, n_bytes, d);
  }
  const WaitEnv env = v.wait_env();
  if (global_thread() == 0) {
    u64 lo[W][2], hi[W][2];
    wait_for_peers<W>(v, env, tag.word, [&](u32 r) {
      bool arrived = true;
#pragma unroll
      for (u32 j = 0; j < 2; ++j) {
        ld_volatile_2x64(region + (slots + r) * 2 * cap + header + 16 * j, lo[r][j], hi[r][j]);
        arrived = arrived && (lo[r][j] & ~0xffffffffull) == flag && (hi[r][j] & ~0xffffffffull) == flag;
      }
      return arrived;
    });
    const auto word = [&](u32 r, u32 j) { return (lo[r][j] & 0xffffffffu) | (hi[r][j] << 32); };
#pragma unroll
    for (u32 r = 0; r < W; ++r)
      if (r != rank) check_tag(env, r, tag, word(r, 0), word(r, 1));
  }
  for (u64 i = global_thread(); i < lines; i += grid_threads()) {
    u64 lo[W], hi[W];
    wait_for_peers<W>(v, env, tag.word, [&](u32 r) {
      ld_volatile_2x64(region + (slots + r) * 2 * cap + 16 * i, lo[r], hi[r]);
      return (lo[r] & ~0xffffffffull) == flag && (hi[r] & ~0xffffffffull) == flag;
    });
#pragma unroll
    for (u32 r = 0; r < W; ++r) {
      if (r != rank) store_line(out + r * n_bytes, i, n_bytes, (lo[r] & 0xffffffffu) | (hi[r] << 32));
    }
  }
  end_call(s, kLL, 0, 0, call);
}

}  // namespace symmkit
