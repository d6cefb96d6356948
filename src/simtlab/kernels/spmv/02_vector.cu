// Rung 2 - CSR, VW lanes a row ("vector" CSR): what changed from rung 1: the lanes of a group
// read consecutive nonzeros of one row, so a warp's loads of vals and cols are coalesced, and
// the group sums its lanes' partial sums with shuffles (log2 VW steps). VW follows the mean row
// length (2 to 32: a warp on 16 nonzeros would idle half its lanes). What it should buy: whole
// 128-byte lines of the matrix a request; a long row still holds its group to the end.
template <int BLOCK, int VW>
__global__ void __launch_bounds__(BLOCK) spmv_vector(int n, const int* __restrict__ row_ptr,
                                                     const int* __restrict__ cols, const float* __restrict__ vals,
                                                     const float* __restrict__ x, float alpha, float beta,
                                                     float* __restrict__ y) {
  static_assert(VW >= 1 && VW <= 32 && (VW & (VW - 1)) == 0, "VW: a power of two lanes, at most a warp");
  const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
  const int lane = threadIdx.x % VW;
  const int r = (int)(t / VW);
  float sum = 0.0f;
  if (r < n)
    for (int k = row_ptr[r] + lane, end = row_ptr[r + 1]; k < end; k += VW) sum += vals[k] * __ldg(x + cols[k]);
#pragma unroll
  for (int off = VW / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off, VW);
  if (r < n && lane == 0) y[r] = alpha * sum + (beta != 0.0f ? beta * y[r] : 0.0f);
}
