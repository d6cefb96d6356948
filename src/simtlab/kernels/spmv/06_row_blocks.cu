// Rung 6 - row blocks summed in shared memory, nonzeros taken in column order: what changed from
// rung 5: no lane owns a row. The rows are cut into blocks of at most ROWS (y of a block fits in
// shared memory) and about equal work, each block's nonzeros stored sorted by column (a value and
// one 32-bit word: the row within the block and the column's low 16 bits; the high bits from a
// table of 65536-column chunks), laid out so that each of a warp's four gathers reads 32
// consecutive nonzeros of that order. A block of threads owns whole row blocks: it adds each
// product into the block's y in shared memory (an atomic add there), then writes
// y = alpha * sum + beta * y once, plainly. What it should buy: the gathers of x in column order -
// neighbouring lanes read neighbouring columns, so a 32-byte sector of x serves every nonzero of
// the block in it (rungs 1-5 fetch a sector for nearly every nonzero: 72% of their L2 traffic on
// power-law rows); and equal work whatever the row lengths. Rows of more than LONG leave the
// blocks (their adds would queue on one shared word) for pieces of PIECE, a warp a piece, added in
// a second launch. Its cost: the atomic adds in shared memory (a compare-and-swap loop).

#include "simtlab_spmv.cuh"

constexpr unsigned SPMV_PAD = 0xffffffffu;  // a padding entry (row 65535: no block has it)
constexpr int PIECE = 256;                  // a long row's piece: a warp's 8 coalesced reads a lane

// The second launch: each long row's pieces, a warp a piece, added into y (which the row blocks
// set to beta * y: the long rows have no entries there).
extern "C" __global__ void spmv_long_pieces(int pieces, const int* __restrict__ piece_row,
                                            const int* __restrict__ piece_begin, const int* __restrict__ row_ptr,
                                            const int* __restrict__ csr_cols, const float* __restrict__ csr_vals,
                                            const float* __restrict__ x, float alpha, float* __restrict__ y) {
  const int q = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (q >= pieces) return;  // (whole warps: no barrier follows)
  const int r = piece_row[q], begin = piece_begin[q], end = min(begin + PIECE, row_ptr[r + 1]);
  const float sum = simtlab::spmv::warp_piece_sum(begin, end, lane, csr_cols, csr_vals, x);
  if (lane == 0) atomicAdd(y + r, alpha * sum);
}

// The last i in [0, count) with a[i] <= v (a[0] <= v assumed; a sorted).
__device__ __forceinline__ int last_at_or_below(const int* __restrict__ a, int count, int v) {
  int lo = 0, hi = count;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (__ldg(a + mid) <= v) lo = mid; else hi = mid;
  }
  return lo;
}

// Block b holds rows blk_row[b] .. blk_row[b + 1] - 1; block of threads t owns row blocks
// cta_blk[t] .. cta_blk[t + 1] - 1. seg_ptr[b * chunks + c]: the first group of 4 entries of block
// b's column chunk c (chunks padded to whole windows of 32 groups: a warp's). Within a window, lane
// l's group holds entries l, 32 + l, 64 + l and 96 + l of the column order: its j-th gather and the
// other lanes' are 32 neighbouring columns.
// ROWS (a row block's bound) and LONG (which rows leave the blocks) are the host's: they shape the
// arrays, not this code, so one build serves them all.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) spmv_row_blocks(
    int chunks, const int* __restrict__ blk_row, const int* __restrict__ cta_blk, const int* __restrict__ seg_ptr,
    const uint4* __restrict__ idx, const float4* __restrict__ vals, const float* __restrict__ x, float alpha,
    float beta, const float* y_in, float* y) {  // (y_in may be y: no __restrict__ on either)
  static_assert(BLOCK % 32 == 0, "whole warps: a warp takes whole windows");
  extern __shared__ float acc[];
  for (int b = cta_blk[blockIdx.x]; b < cta_blk[blockIdx.x + 1]; ++b) {
    const int row0 = __ldg(blk_row + b), rows = __ldg(blk_row + b + 1) - row0;
    const int* const seg = seg_ptr + (long long)b * chunks;
    const int start = __ldg(seg), end = __ldg(seg + chunks);
    for (int i = threadIdx.x; i < rows; i += BLOCK) acc[i] = 0.0f;
    __syncthreads();
    int g = start + threadIdx.x;
    if (g < end) {
      // this thread's chunk: found once, then stepped (a chunk spans many of the block's strides)
      int c = last_at_or_below(seg, chunks, g);
      int chunk_end = __ldg(seg + c + 1);
      uint4 k = __ldcs(idx + g);
      float4 v = __ldcs(vals + g);
      for (;;) {
        const int next = g + BLOCK;  // the next group's entries in flight while this one gathers
        uint4 k_next = k;
        float4 v_next = v;
        if (next < end) k_next = __ldcs(idx + next), v_next = __ldcs(vals + next);
        while (chunk_end <= g) chunk_end = __ldg(seg + ++c + 1);
        const float* xc = x + ((long long)c << 16);
        const unsigned ks[4] = {k.x, k.y, k.z, k.w};
        const float vs[4] = {v.x, v.y, v.z, v.w};
        float p[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) p[j] = ks[j] != SPMV_PAD ? vs[j] * __ldg(xc + (ks[j] & 0xffffu)) : 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (ks[j] != SPMV_PAD) atomicAdd(acc + (ks[j] >> 16), p[j]);
        if (next >= end) break;
        g = next, k = k_next, v = v_next;
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < rows; i += BLOCK) {  // the block's rows are this block of threads' alone
      y[row0 + i] = beta != 0.0f ? alpha * acc[i] + beta * y_in[row0 + i] : alpha * acc[i];
    }
    __syncthreads();  // (the next block clears acc)
  }
}
