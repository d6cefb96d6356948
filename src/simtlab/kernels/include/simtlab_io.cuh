// Element types of the memory-bound families that take fp32, bf16 or fp16 storage:
// DT 0 = float, DT 1 = bf16, DT 2 = fp16 (both in 16-bit words). Arithmetic is
// always fp32 in registers; only loads and stores change width, which halves the
// bytes a 16-bit kernel moves.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace simtlab {

template <int DT>
struct Io;

template <>
struct Io<0> {
  using T = float;
  __device__ __forceinline__ static float load(const T* p) { return __ldg(p); }
  __device__ __forceinline__ static void store(T* p, float v) { *p = v; }
  // Four consecutive elements (16-byte aligned): one LDG.128 / STG.128.
  __device__ __forceinline__ static float4 load4(const T* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
  __device__ __forceinline__ static void store4(T* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
  // Four elements kept in their storage format (registers: 4 for fp32, 2 for bf16), unpacked at use.
  using Raw4 = float4;
  __device__ __forceinline__ static Raw4 load4_raw(const T* p) { return load4(p); }
  __device__ __forceinline__ static Raw4 pack4(float a, float b, float c, float d) { return make_float4(a, b, c, d); }
  __device__ __forceinline__ static float4 unpack4(Raw4 r) { return r; }
};

template <>
struct Io<1> {
  using T = __nv_bfloat16;
  __device__ __forceinline__ static float load(const T* p) { return __bfloat162float(p[0]); }
  __device__ __forceinline__ static void store(T* p, float v) { *p = __float2bfloat16_rn(v); }
  // Four consecutive elements (8-byte aligned): one LDG.64 / STG.64.
  __device__ __forceinline__ static float4 load4(const T* p) {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
  __device__ __forceinline__ static void store4(T* p, float4 v) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 raw;
    raw.x = *reinterpret_cast<const unsigned*>(&lo);
    raw.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(p) = raw;
  }
  using Raw4 = uint2;
  __device__ __forceinline__ static Raw4 load4_raw(const T* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
  __device__ __forceinline__ static Raw4 pack4(float a, float b, float c, float d) {  // exact for bf16 values
    const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
    return make_uint2(*reinterpret_cast<const unsigned*>(&lo), *reinterpret_cast<const unsigned*>(&hi));
  }
  __device__ __forceinline__ static float4 unpack4(Raw4 raw) {
    const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
    const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
};

template <>
struct Io<2> {
  using T = __half;
  __device__ __forceinline__ static float load(const T* p) { return __half2float(p[0]); }
  __device__ __forceinline__ static void store(T* p, float v) { *p = __float2half_rn(v); }
  // Four consecutive elements (8-byte aligned): one LDG.64 / STG.64.
  __device__ __forceinline__ static float4 load4(const T* p) { return unpack4(load4_raw(p)); }
  __device__ __forceinline__ static void store4(T* p, float4 v) {
    *reinterpret_cast<uint2*>(p) = pack4(v.x, v.y, v.z, v.w);
  }
  using Raw4 = uint2;
  __device__ __forceinline__ static Raw4 load4_raw(const T* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
  __device__ __forceinline__ static Raw4 pack4(float a, float b, float c, float d) {
    const __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
    return make_uint2(*reinterpret_cast<const unsigned*>(&lo), *reinterpret_cast<const unsigned*>(&hi));
  }
  __device__ __forceinline__ static float4 unpack4(Raw4 raw) {
    const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
  }
};

// The row a thread works on and its place among the LANES threads sharing it: a warp per row
// (WARP_ROWS; BLOCK/32 rows a block) or the block's one row. Its group j of four values starts at
// column col(j).
template <int BLOCK, int WARP_ROWS>
struct RowShare {
  static constexpr int LANES = WARP_ROWS ? 32 : BLOCK;
  int row, me;
  __device__ __forceinline__ RowShare() : RowShare(threadIdx.x) {}
  __device__ __forceinline__ explicit RowShare(int tid)
      : row(WARP_ROWS ? blockIdx.x * (BLOCK / 32) + tid / 32 : blockIdx.x), me(WARP_ROWS ? tid % 32 : tid) {}
  // Past the last row (whole warps, WARP_ROWS only: no block barrier follows in that mode).
  __device__ __forceinline__ bool idle(int rows) const { return WARP_ROWS && row >= rows; }
  __device__ __forceinline__ int col(int j) const { return (me + LANES * j) * 4; }
};

// The four values of a row at column c (a RowShare's col(j)), fp32, `pad` for the columns past
// the row's end (VEC: 16-byte-aligned groups, cols % 4 == 0; else one by one).
template <int DT, bool VEC>
__device__ __forceinline__ float4 load_group(const typename Io<DT>::T* row, int c, int cols, float pad) {
  using IoT = Io<DT>;
  if (VEC) return c < cols ? IoT::load4(row + c) : make_float4(pad, pad, pad, pad);
  return make_float4(c + 0 < cols ? IoT::load(row + c + 0) : pad, c + 1 < cols ? IoT::load(row + c + 1) : pad,
                     c + 2 < cols ? IoT::load(row + c + 2) : pad, c + 3 < cols ? IoT::load(row + c + 3) : pad);
}

// Four values to a row at column c: one vector store (VEC), else the ones inside the row, one by one.
template <int DT, bool VEC>
__device__ __forceinline__ void store_group(typename Io<DT>::T* row, int c, int cols, float4 o) {
  using IoT = Io<DT>;
  if (VEC) {
    if (c < cols) IoT::store4(row + c, o);
  } else {
    if (c + 0 < cols) IoT::store(row + c + 0, o.x);
    if (c + 1 < cols) IoT::store(row + c + 1, o.y);
    if (c + 2 < cols) IoT::store(row + c + 2, o.z);
    if (c + 3 < cols) IoT::store(row + c + 3, o.w);
  }
}

}  // namespace simtlab
