// Rung 3 - SELL-C-sigma (C = 32): what changed from rung 2: the matrix is stored again, once,
// outside the timed call - rows sorted by length within windows of SIGMA rows, cut into slices
// of 32 (a warp), each slice padded to its longest row and laid out column by column - so lane
// i of a warp reads element j of its row at slice + 32 j + i: every load of vals and cols is one
// coalesced line, with no row pointers and no divergence (a slice's rows end together). What it
// should buy: ELL's perfect access without ELL's padding to the longest row of the whole matrix
// (sorting puts rows of like length in a slice). Padding has column -1 and reads no x.

// Row i of the sorted, sliced matrix (a lane of slice i / 32): y[perm[i]] = alpha * sum + beta * y.
__device__ __forceinline__ void sell_row(int i, const int* __restrict__ slice_ptr, const int* __restrict__ cols,
                                         const float* __restrict__ vals, const int* __restrict__ perm,
                                         const float* __restrict__ x, float alpha, float beta,
                                         float* __restrict__ y) {
  const int s = i / 32, lane = i % 32;
  const int begin = slice_ptr[s], width = (slice_ptr[s + 1] - begin) / 32;
  float sum = 0.0f;
  for (int j = 0, k = begin + lane; j < width; ++j, k += 32) {
    const int c = cols[k];
    sum += c >= 0 ? vals[k] * __ldg(x + c) : 0.0f;
  }
  const int r = perm[i];  // (-1: a padding row of the last slice)
  if (r >= 0) y[r] = alpha * sum + (beta != 0.0f ? beta * y[r] : 0.0f);
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) spmv_sell(int slice_rows, const int* __restrict__ slice_ptr,
                                                   const int* __restrict__ cols, const float* __restrict__ vals,
                                                   const int* __restrict__ perm, const float* __restrict__ x,
                                                   float alpha, float beta, float* __restrict__ y) {
  const int i = blockIdx.x * BLOCK + threadIdx.x;  // a row of the sorted, sliced matrix
  if (i < slice_rows) sell_row(i, slice_ptr, cols, vals, perm, x, alpha, beta, y);
}
