// How the copy-engine all-reduce splits its work: rank r reduces chunk r of the elements, in pieces that
// flow through the pipeline one by one (src/ops/gpu-collectives.ts). Pure arithmetic, the same on every
// rank, so that every rank agrees on which piece a flag announces.

/** At most this many pieces per chunk: the flags buffer holds MAX_PIECES per (region, rank). */
export const MAX_PIECES = 16;
/** Flags are laid out for up to this many ranks (SymmView's kMaxWorld). */
export const MAX_FLAG_WORLD = 8;
/** Pieces are at least this large (a copy engine's launch costs a few microseconds), up to MAX_PIECES. */
export const MIN_PIECE_BYTES = 4 * 1024 * 1024;
/** Chunk and piece boundaries fall on multiples of this many elements (16-byte vectors for any dtype up
 * to 2 bytes, 32 bytes for f32). */
const ALIGN_ELEMENTS = 8;

export interface CopyEnginePlan {
  /** Elements per rank's chunk (the last ranks' may hold fewer, or none). */
  readonly chunk: number;
  readonly pieces: number;
  /** Elements per piece (the last piece of a chunk may hold fewer, or none). */
  readonly piece: number;
  /** Staging bytes per rank: W reduce-scatter slots and W all-gather slots of a chunk each. */
  readonly stagingBytes: number;
}

const roundUp = (a: number, b: number): number => Math.ceil(a / b) * b;

export function copyEnginePlan(n: number, world: number, elementBytes: number): CopyEnginePlan {
  const chunk = roundUp(Math.ceil(n / world), ALIGN_ELEMENTS);
  const pieces = Math.min(MAX_PIECES, Math.max(1, Math.ceil((chunk * elementBytes) / MIN_PIECE_BYTES)));
  const piece = roundUp(Math.ceil(chunk / pieces), ALIGN_ELEMENTS);
  return { chunk, pieces, piece, stagingBytes: 2 * world * chunk * elementBytes };
}

/** Elements [lo, hi) of piece q of rank r's chunk, clipped to n (hi - lo may be 0). */
export function pieceRange(plan: CopyEnginePlan, n: number, r: number, q: number): [number, number] {
  const start = r * plan.chunk;
  const lo = Math.min(n, start + Math.min(plan.chunk, q * plan.piece));
  const hi = Math.min(n, start + Math.min(plan.chunk, (q + 1) * plan.piece));
  return [lo, hi];
}

/** The u32 flag rank `from` sets in a peer for piece q: region 0 (its reduce-scatter piece landed) or 1
 * (its reduced piece is ready to pull). take_flags reads a region's flags for one piece from index
 * flagIndex(region, 0, q) with stride MAX_PIECES. */
export function flagIndex(region: 0 | 1, from: number, q: number): number {
  return (region * MAX_FLAG_WORLD + from) * MAX_PIECES + q;
}
export const FLAG_WORDS = 2 * MAX_FLAG_WORLD * MAX_PIECES;
