// Reduction operators shared by the reduction ladder: OP 0 = sum, OP 1 = max.
#pragma once

namespace simtlab {

template <int OP>
struct Reduce;

template <>
struct Reduce<0> {
  __device__ __forceinline__ static float identity() { return 0.0f; }
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
};

template <>
struct Reduce<1> {
  __device__ __forceinline__ static float identity() { return -__int_as_float(0x7f800000); }  // -inf
  __device__ __forceinline__ static float apply(float a, float b) { return fmaxf(a, b); }
};

// Tree over the 32 lanes of a warp with register shuffles: no shared memory, no barrier.
template <int OP>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = Reduce<OP>::apply(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace simtlab

namespace simtlab {

// The last six steps of a shared-memory tree (64 values -> 1) inside warp 0.
// Only one warp is active, so __syncwarp() replaces __syncthreads(); the
// barriers between the read and the write of each step are what make it safe
// under independent thread scheduling (Volta+), unlike the old volatile trick.
template <int OP>
__device__ __forceinline__ float warp_tail(float* s, int tid) {
  float v = s[tid];
#pragma unroll
  for (int offset = 32; offset > 0; offset >>= 1) {
    v = Reduce<OP>::apply(v, s[tid + offset]);
    __syncwarp();
    s[tid] = v;
    __syncwarp();
  }
  return v;
}

}  // namespace simtlab

namespace simtlab {

// Block-wide reduction with shuffles (rung 8's scheme): each warp reduces in
// registers, one value per warp passes through shared memory, warp 0 finishes.
// The result is valid in thread 0.
template <int BLOCK, int OP>
__device__ __forceinline__ float block_reduce(float v, float* warp_vals) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce<OP>(v);
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < BLOCK / 32 ? warp_vals[lane] : Reduce<OP>::identity();
    v = warp_reduce<OP>(v);
  }
  return v;
}

}  // namespace simtlab

namespace simtlab {

// Butterfly (xor) reduction: every lane ends with the warp's result.
template <int OP>
__device__ __forceinline__ float warp_allreduce(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = Reduce<OP>::apply(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide reduction whose result every thread receives (softmax and normalisations need it
// in all threads). `warp_vals` holds BLOCK/32 floats; it may be reused right after the call.
template <int BLOCK, int OP>
__device__ __forceinline__ float block_allreduce(float v, float* warp_vals) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  v = warp_allreduce<OP>(v);
  if constexpr (BLOCK > 32) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();  // an earlier call's readers are done with warp_vals
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    v = warp_allreduce<OP>(lane < BLOCK / 32 ? warp_vals[lane] : Reduce<OP>::identity());
  }
  return v;
}

}  // namespace simtlab

namespace simtlab {

// OP 2 = max as torch.amax computes it: a NaN anywhere makes the result NaN (fmaxf, OP 1, drops it).
template <>
struct Reduce<2> {
  __device__ __forceinline__ static float identity() { return -__int_as_float(0x7f800000); }  // -inf
  __device__ __forceinline__ static float apply(float a, float b) { return (a > b || a != a) ? a : b; }
};

}  // namespace simtlab
