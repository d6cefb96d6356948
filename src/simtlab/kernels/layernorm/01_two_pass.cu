// Rung 1 - two-pass LayerNorm, a block per row: one sweep of the row sums x
// for the mean, a second sums (x - mean)^2 for the variance (the textbook
// two-pass formula: no cancellation, unlike E[x^2] - E[x]^2), a third writes
// y = (x - mean) * rsqrt(var + eps) * w + b. Each sweep is a block reduction
// with warp shuffles; the row is read three times (the rereads mostly from L2)
// and written once.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
layernorm_two_pass(const typename simtlab::Io<DT>::T* __restrict__ x, const typename simtlab::Io<DT>::T* __restrict__ w,
                   const typename simtlab::Io<DT>::T* __restrict__ b, typename simtlab::Io<DT>::T* __restrict__ y,
                   int rows, int cols, float eps) {
  using Io = simtlab::Io<DT>;
  __shared__ float warp_vals[32];
  const int row = blockIdx.x, tid = threadIdx.x;
  const typename Io::T* xr = x + (size_t)row * cols;
  float s = 0.0f;
  for (int c = tid; c < cols; c += BLOCK) s += Io::load(xr + c);
  const float mean = simtlab::block_allreduce<BLOCK, 0>(s, warp_vals) / cols;
  float q = 0.0f;
  for (int c = tid; c < cols; c += BLOCK) {
    const float d = Io::load(xr + c) - mean;
    q = fmaf(d, d, q);
  }
  const float rstd = rsqrtf(simtlab::block_allreduce<BLOCK, 0>(q, warp_vals) / cols + eps);
  typename Io::T* yr = y + (size_t)row * cols;
  for (int c = tid; c < cols; c += BLOCK)
    Io::store(yr + c, fmaf((Io::load(xr + c) - mean) * rstd, Io::load(w + c), Io::load(b + c)));
}
