// Rung 1 - three kernels, the textbook way: one launch finds each row's
// maximum, a second sums exp(x - max), a third writes exp(x - max) / sum. (One
// kernel with a phase argument, launched three times.) Each launch streams
// the whole input from DRAM again: 3 reads + 1 write of the matrix, plus two
// launch gaps, where the data needs 1 + 1. One block per row.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_three_pass(const typename simtlab::Io<DT>::T* __restrict__ x, typename simtlab::Io<DT>::T* __restrict__ y,
                   float* __restrict__ stats, int rows, int cols, int phase) {
  using Io = simtlab::Io<DT>;
  __shared__ float warp_vals[32];
  const int row = blockIdx.x, tid = threadIdx.x;
  const typename Io::T* xr = x + (size_t)row * cols;
  if (phase == 0) {
    float m = simtlab::Reduce<1>::identity();
    for (int c = tid; c < cols; c += BLOCK) m = fmaxf(m, Io::load(xr + c));
    m = simtlab::block_allreduce<BLOCK, 1>(m, warp_vals);
    if (tid == 0) stats[row] = m;
  } else if (phase == 1) {
    const float m = stats[row];
    float s = 0.0f;
    for (int c = tid; c < cols; c += BLOCK) s += expf(Io::load(xr + c) - m);
    s = simtlab::block_allreduce<BLOCK, 0>(s, warp_vals);
    if (tid == 0) stats[rows + row] = s;
  } else {
    const float m = stats[row], inv = 1.0f / stats[rows + row];
    typename Io::T* yr = y + (size_t)row * cols;
    for (int c = tid; c < cols; c += BLOCK) Io::store(yr + c, expf(Io::load(xr + c) - m) * inv);
  }
}
