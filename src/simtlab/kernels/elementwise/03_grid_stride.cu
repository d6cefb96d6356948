// Rung 3 - grid-stride: a grid sized to fill the GPU once (SMs x resident
// blocks) loops over the array; each iteration issues UNROLL independent float4
// loads per operand before the first add, so every thread keeps several 16-byte
// requests in flight. Fewer, longer-lived blocks: no tail of short blocks and
// block launch cost paid once per resident slot.
template <int BLOCK, int UNROLL, bool VEC>
__global__ void __launch_bounds__(BLOCK)
vadd_grid_stride(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z, long long n) {
  const long long groups = VEC ? n / 4 : 0;  // whole float4 groups
  const long long stride = (long long)gridDim.x * BLOCK;
  const long long first = (long long)blockIdx.x * BLOCK + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* y4 = reinterpret_cast<const float4*>(y);
  float4* z4 = reinterpret_cast<float4*>(z);
  long long q = first;
  for (; q + (UNROLL - 1) * stride < groups; q += UNROLL * stride) {
    float4 a[UNROLL], b[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      a[u] = __ldg(x4 + q + u * stride);
      b[u] = __ldg(y4 + q + u * stride);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      z4[q + u * stride] = make_float4(a[u].x + b[u].x, a[u].y + b[u].y, a[u].z + b[u].z, a[u].w + b[u].w);
  }
  for (; q < groups; q += stride) {
    const float4 a = __ldg(x4 + q), b = __ldg(y4 + q);
    z4[q] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  // Scalar remainder: the n % 4 tail, or everything when the pointers are not 16-byte aligned.
  for (long long i = 4 * groups + first; i < n; i += stride) z[i] = x[i] + y[i];
}
