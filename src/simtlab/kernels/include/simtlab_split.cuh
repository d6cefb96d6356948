// K split over a cluster (gemm_tc rung 7, gemm rung 14): the cluster's size and this block's rank
// (1 and 0 without clusters, or before sm_90), a barrier over every thread of the cluster, and a
// float read from any block's shared memory (distributed shared memory).
#pragma once
#include "simtlab_hopper.cuh"  // (its cluster helpers, used here only where __CUDA_ARCH__ >= 900)

namespace simtlab {

__device__ __forceinline__ unsigned cluster_blocks() {
  unsigned n = 1;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
#endif
  return n;
}

__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  return cluster_ctarank();
#else
  return 0;
#endif
}

// Every thread of every block of the cluster; shared-memory writes before it are visible after it.
__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __syncthreads();
#endif
}

// The float at this block's shared address `addr` in the cluster's block `rank`: through the
// cluster's window where the launch made clusters (`clustered`: S > 1, uniform across the block),
// else a plain shared load.
__device__ __forceinline__ float load_peer(unsigned addr, unsigned rank, bool clustered) {
  float v;
#if __CUDA_ARCH__ >= 900
  if (clustered) {
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(cluster_map(addr, rank)) : "memory");
    return v;
  }
#endif
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

}  // namespace simtlab
