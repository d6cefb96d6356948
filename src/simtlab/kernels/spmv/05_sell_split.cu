// Rung 5 - SELL with long rows split: what changed from rung 3: rows longer than CHUNK nonzeros
// leave the slices. Each is cut into pieces of CHUNK nonzeros, a warp a piece reading its stretch
// of the CSR arrays (coalesced), a shuffle sum, one atomicAdd into y (a first launch sets those
// rows' y to beta * y). What it should buy: rung 3's coalesced slices on power-law rows too - a
// slice pads to at most CHUNK, and no warp walks a 60000-nonzero row alone (rung 3's slowest
// warp did: the whole launch waited for it). The pieces' blocks come first in the grid, so the
// long rows start at once; the slices' blocks follow.
#include "03_sell.cu"
#include "simtlab_spmv.cuh"

// The first launch: y = beta * y on the long rows (0 where beta == 0: y is not read).
extern "C" __global__ void spmv_long_rows_beta(int rows, const int* __restrict__ long_rows, float beta,
                                               float* __restrict__ y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) {
    const int r = long_rows[i];
    y[r] = beta != 0.0f ? beta * y[r] : 0.0f;
  }
}

template <int BLOCK, int CHUNK>
__global__ void __launch_bounds__(BLOCK) spmv_sell_split(
    int pieces, const int* __restrict__ piece_row, const int* __restrict__ piece_begin,
    const int* __restrict__ row_ptr, const int* __restrict__ csr_cols, const float* __restrict__ csr_vals,
    int slice_rows, const int* __restrict__ slice_ptr, const int* __restrict__ cols,
    const float* __restrict__ vals, const int* __restrict__ perm, const float* __restrict__ x, float alpha,
    float beta, float* __restrict__ y) {
  constexpr int WARPS = BLOCK / 32;
  const int piece_blocks = (pieces + WARPS - 1) / WARPS;
  if ((int)blockIdx.x >= piece_blocks) {  // a block of slices, as in rung 3
    const int i = (blockIdx.x - piece_blocks) * BLOCK + threadIdx.x;
    if (i < slice_rows) sell_row(i, slice_ptr, cols, vals, perm, x, alpha, beta, y);
    return;
  }
  const int w = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (w >= pieces) return;  // (the last block's spare warps: no barrier follows)
  const int r = piece_row[w], begin = piece_begin[w], end = min(begin + CHUNK, row_ptr[r + 1]);
  const float sum = simtlab::spmv::warp_piece_sum(begin, end, lane, csr_cols, csr_vals, x);
  if (lane == 0) atomicAdd(y + r, alpha * sum);
}
