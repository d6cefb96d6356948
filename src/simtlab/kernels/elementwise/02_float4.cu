// Rung 2 - float4: each thread moves 16 bytes per operand with one LDG.128 /
// STG.128: a quarter of the threads, load instructions and index math, and
// four times the bytes in flight per load. The last n % 4 elements take a
// scalar tail; VEC=false (a base pointer not 16-byte aligned) takes the
// scalar path for every element instead of faulting on a misaligned float4.
template <int BLOCK, bool VEC>
__global__ void __launch_bounds__(BLOCK)
vadd_float4(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z, long long n) {
  const long long q = (long long)blockIdx.x * BLOCK + threadIdx.x;  // index of a 4-group
  const long long i = 4 * q;
  if (i >= n) return;
  if (VEC && i + 3 < n) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x) + q);
    const float4 b = __ldg(reinterpret_cast<const float4*>(y) + q);
    reinterpret_cast<float4*>(z)[q] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    return;
  }
  for (long long j = i; j < n && j < i + 4; ++j) z[j] = x[j] + y[j];
}
