// Rung 1 - three kernels, the textbook way: one launch finds each row's
// maximum, a second sums exp(x - max), a third writes exp(x - max) / sum. (One
// kernel with a phase argument, launched three times.) Each launch streams
// the whole input from DRAM again: 3 reads + 1 write of the matrix, plus two
// launch gaps, where the data needs 1 + 1. One block per row.
#include "simtlab_reduce.cuh"

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_three_pass(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ stats, int rows, int cols,
                   int phase) {
  __shared__ float warp_vals[32];
  const int row = blockIdx.x, tid = threadIdx.x;
  const float* xr = x + (size_t)row * cols;
  if (phase == 0) {
    float m = simtlab::Reduce<1>::identity();
    for (int c = tid; c < cols; c += BLOCK) m = fmaxf(m, xr[c]);
    m = simtlab::block_allreduce<BLOCK, 1>(m, warp_vals);
    if (tid == 0) stats[row] = m;
  } else if (phase == 1) {
    const float m = stats[row];
    float s = 0.0f;
    for (int c = tid; c < cols; c += BLOCK) s += expf(xr[c] - m);
    s = simtlab::block_allreduce<BLOCK, 0>(s, warp_vals);
    if (tid == 0) stats[rows + row] = s;
  } else {
    const float m = stats[row], inv = 1.0f / stats[rows + row];
    float* yr = y + (size_t)row * cols;
    for (int c = tid; c < cols; c += BLOCK) yr[c] = expf(xr[c] - m) * inv;
  }
}
