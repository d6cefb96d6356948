// Rung 3 - online softmax: one pass keeps a running maximum m and a running sum
// s of exp(x - m), rescaling s whenever m grows (s = s * exp(m_old - m_new)),
// and partial (m, s) pairs from different threads combine the same way. The
// statistics take one read of the row instead of two: 2 reads + 1 write.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

__device__ __forceinline__ void softmax_combine(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  const float a = m == -__int_as_float(0x7f800000) ? 0.0f : s * expf(m - M);  // an empty partial adds 0
  const float b = m2 == -__int_as_float(0x7f800000) ? 0.0f : s2 * expf(m2 - M);
  m = M;
  s = a + b;
}

template <int DT, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
softmax_online(const typename simtlab::Io<DT>::T* __restrict__ x, typename simtlab::Io<DT>::T* __restrict__ y, int rows,
               int cols) {
  using Io = simtlab::Io<DT>;
  __shared__ float warp_m[32], warp_s[32];
  const int row = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const typename Io::T* xr = x + (size_t)row * cols;
  float m = -__int_as_float(0x7f800000), s = 0.0f;
  for (int c = tid; c < cols; c += BLOCK) {
    const float v = Io::load(xr + c);
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (v != -__int_as_float(0x7f800000)) {  // a masked entry adds 0 (exp(-inf - -inf) is NaN)
      s += expf(v - m);
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    softmax_combine(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  if constexpr (BLOCK > 32) {
    if (lane == 0) {
      warp_m[warp] = m;
      warp_s[warp] = s;
    }
    __syncthreads();
    m = lane < BLOCK / 32 ? warp_m[lane] : -__int_as_float(0x7f800000);
    s = lane < BLOCK / 32 ? warp_s[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      softmax_combine(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  }
  const float inv = 1.0f / s;
  typename Io::T* yr = y + (size_t)row * cols;
  for (int c = tid; c < cols; c += BLOCK) Io::store(yr + c, expf(Io::load(xr + c) - m) * inv);
}
