// cp.async (sm_80+) wrappers: global -> shared copies that bypass the register
// file and complete asynchronously in commit groups. A src-size of 0 writes
// zeros, which is how the GEMM rungs pad tiles that hang over the matrix edge.
#pragma once

namespace simtlab {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 4-byte copy (through L1: .ca is the only mode allowed for 4 bytes).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

// 8-byte copy (rows aligned to 8 bytes only; through L1, as 4-byte copies).
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 8 : 0));
}

// 16-byte copy that skips L1 (.cg): streamed tiles are reused from shared memory, not L1.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}

// The same two copies with no src-size operand, for copies known to be in bounds: no predicate
// to compute, no fallback address to select.
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most N commit groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A ring of STAGES shared-memory slots fed by cp.async, `load(slot, k0)` issuing one slice's copies
// (BK deep). ring_prologue puts the first STAGES-1 slices in flight; ring_advance, at the top of
// step kt, waits until slice kt has landed for every thread (so slot kt-1 is free) and issues
// slice kt + STAGES - 1 into it. Every step commits a group, empty or not, so the wait counts hold.
template <int STAGES, class Load>
__device__ __forceinline__ void ring_prologue(int slices, int BK, Load&& load) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < slices) load(s, s * BK);
    cp_async_commit();
  }
}

template <int STAGES, class Load>
__device__ __forceinline__ void ring_advance(int kt, int slices, int BK, Load&& load) {
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  const int next = kt + STAGES - 1;
  if (next < slices) load(next % STAGES, next * BK);
  cp_async_commit();
}

}  // namespace simtlab
