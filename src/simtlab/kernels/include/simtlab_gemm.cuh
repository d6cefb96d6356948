// Helpers shared by the fp32 GEMM rungs: bounds-checked 4-wide loads and the
// alpha/beta epilogue. Row-major, contiguous: A is MxK, B is KxN, C is MxN.
#pragma once

namespace simtlab {

// C = alpha*acc + beta*C. With beta == 0 C is never read (BLAS semantics), so
// NaN left in an uninitialised C cannot leak into the result.
__device__ __forceinline__ float axpby(float acc, float alpha, float beta, const float* c) {
  return beta == 0.0f ? alpha * acc : fmaf(beta, *c, alpha * acc);
}

// p[0..3] of a row with `avail` valid elements from p on (<= 0: none), zero-filled.
// VEC: the host checked 16-byte alignment and that row lengths are multiples of 4,
// so a 4-group is either wholly inside or wholly outside the matrix.
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* p, int avail) {
  if (VEC) {
    return avail > 0 ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float4 v;
  v.x = avail > 0 ? __ldg(p + 0) : 0.f;
  v.y = avail > 1 ? __ldg(p + 1) : 0.f;
  v.z = avail > 2 ? __ldg(p + 2) : 0.f;
  v.w = avail > 3 ? __ldg(p + 3) : 0.f;
  return v;
}

// c[0..3] = alpha*v + beta*c[0..3] for the `avail` valid elements from c on.
template <bool VEC>
__device__ __forceinline__ void store4(float* c, int avail, float4 v, float alpha, float beta) {
  if (avail <= 0) return;
  if (VEC) {
    float4 o = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
    if (beta != 0.0f) {
      const float4 old = *reinterpret_cast<const float4*>(c);
      o.x = fmaf(beta, old.x, o.x);
      o.y = fmaf(beta, old.y, o.y);
      o.z = fmaf(beta, old.z, o.z);
      o.w = fmaf(beta, old.w, o.w);
    }
    *reinterpret_cast<float4*>(c) = o;
    return;
  }
  const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (i < avail) c[i] = axpby(e[i], alpha, beta, c + i);
  }
}

}  // namespace simtlab
