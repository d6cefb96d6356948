// Rung 6 - row blocks summed in shared memory, nonzeros taken in column order: what changed from
// rung 5: no lane owns a row. The rows are cut into blocks of ROWS (y of a block fits in shared
// memory), and each block's nonzeros are stored sorted by column (a value and one 32-bit word: the
// row within the block and the column's low 16 bits; the high bits from a table of 65536-column
// chunks), stored so that each of a warp's four gathers reads 32 consecutive nonzeros of that
// order. Every block of threads takes an equal run of it, adds each product into its
// block's y in shared memory (an atomic add there) and adds the sums into y once (a first launch
// sets y to beta * y). What it should buy: the gathers of x in column order - neighbouring lanes
// read neighbouring columns, so a 32-byte sector of x serves every nonzero of the block that
// falls in it (rungs 1-5 fetch a sector for nearly every nonzero: 72% of their L2 traffic on
// power-law rows); and equal work a block whatever the row lengths. Rows of more than LONG leave
// the blocks (their adds would queue on one shared word) for pieces of PIECE, a warp a piece, as
// in rung 5. Its cost: the atomic adds in shared memory (a compare-and-swap loop), y by atomics.

#include "simtlab_spmv.cuh"

constexpr unsigned SPMV_PAD = 0xffffffffu;  // a padding entry (row 65535: no block has it)

// The first launch: y = beta * y (0 where beta == 0: y is not read).
extern "C" __global__ void spmv_scale_y(int n, float beta, float* __restrict__ y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = beta != 0.0f ? beta * y[i] : 0.0f;
}

// The last i in [0, count) with a[i * stride] <= v (a[0] <= v assumed; a sorted).
__device__ __forceinline__ int last_at_or_below(const int* __restrict__ a, long long stride, int count, long long v) {
  int lo = 0, hi = count;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (__ldg(a + mid * stride) <= v) lo = mid; else hi = mid;
  }
  return lo;
}

constexpr int PIECE = 256;  // a long row's piece: a warp's 8 coalesced reads a lane

// seg_ptr[b * chunks + c]: the first group of 4 entries of block b's column chunk c (chunks padded to
// whole windows of 32 groups: a warp's); seg_ptr[blocks * chunks] = groups. Within a window, lane l's
// group holds entries l, 32 + l, 64 + l and 96 + l of the column order: its j-th gather and the other
// lanes' are 32 neighbouring columns.
template <int BLOCK, int ROWS, int LONG>
__global__ void __launch_bounds__(BLOCK) spmv_row_blocks(
    int n, int blocks, int chunks, int groups, const int* __restrict__ seg_ptr, const uint4* __restrict__ idx,
    const float4* __restrict__ vals, int pieces, const int* __restrict__ piece_row,
    const int* __restrict__ piece_begin, const int* __restrict__ row_ptr, const int* __restrict__ csr_cols,
    const float* __restrict__ csr_vals, const float* __restrict__ x, float alpha, float* __restrict__ y) {
  static_assert(ROWS >= 1 && ROWS < 65536, "a row within a block has 16 bits");
  static_assert(LONG >= PIECE, "a long row has at least a piece");
  static_assert(BLOCK % 32 == 0, "whole warps: a warp takes whole windows");
  extern __shared__ float acc[];
  {  // this block's share of the long rows' pieces first
    constexpr int WARPS = BLOCK / 32;
    const int q1 = (int)((long long)pieces * (blockIdx.x + 1) / gridDim.x), lane = threadIdx.x % 32;
    for (int q = (int)((long long)pieces * blockIdx.x / gridDim.x) + threadIdx.x / 32; q < q1; q += WARPS) {
      const int r = piece_row[q], begin = piece_begin[q], end = min(begin + PIECE, row_ptr[r + 1]);
      const float sum = simtlab::spmv::warp_piece_sum(begin, end, lane, csr_cols, csr_vals, x);
      if (lane == 0) atomicAdd(y + r, alpha * sum);
    }
  }
  const long long windows = groups / 32;  // an equal run of whole windows a block of threads
  const long long g0 = windows * blockIdx.x / gridDim.x * 32, g1 = windows * (blockIdx.x + 1) / gridDim.x * 32;
  if (g0 >= g1) return;
  int b = last_at_or_below(seg_ptr, chunks, blocks, g0);  // the block holding group g0
  for (long long start = g0; start < g1; ++b) {
    const long long first_seg = (long long)b * chunks;
    const long long end = min(g1, (long long)__ldg(seg_ptr + first_seg + chunks));
    if (end <= start) continue;  // (an empty block)
    const int row0 = b * ROWS, rows = min(ROWS, n - row0);
    for (int i = threadIdx.x; i < rows; i += BLOCK) acc[i] = 0.0f;
    __syncthreads();
    long long g = start + threadIdx.x;
    if (g < end) {
      // this thread's chunk: found once, then stepped (a chunk spans many of the block's strides)
      int c = last_at_or_below(seg_ptr + first_seg, 1, chunks, g);
      long long chunk_end = __ldg(seg_ptr + first_seg + c + 1);
      uint4 k = __ldcs(idx + g);
      float4 v = __ldcs(vals + g);
      for (;;) {
        const long long next = g + BLOCK;  // the next group's entries in flight while this one gathers
        uint4 k_next = k;
        float4 v_next = v;
        if (next < end) k_next = __ldcs(idx + next), v_next = __ldcs(vals + next);
        while (chunk_end <= g) chunk_end = __ldg(seg_ptr + first_seg + ++c + 1);
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
    for (int i = threadIdx.x; i < rows; i += BLOCK) {
      const float s = acc[i];
      if (s != 0.0f) atomicAdd(y + row0 + i, alpha * s);
    }
    __syncthreads();  // (the next block clears acc)
    start = end;
  }
}
