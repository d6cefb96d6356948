// Rung 3 - shared-memory tiling: a TILExTILE block cooperatively stages a tile
// of A and a tile of B in shared memory, synchronises, and every thread reuses
// the TILE values of each from there. Global traffic drops by a factor of TILE;
// each FMA now costs two shared loads, which becomes the next bottleneck.
// __syncthreads() fences both the fill (before use) and the reuse (before refill).
#include "simtlab_gemm.cuh"

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem_tiling(int M, int N, int K, float alpha, const float* __restrict__ A,
                 const float* __restrict__ B, float beta, float* __restrict__ C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    // Out-of-range elements are zero, so partial tiles need no special inner loop.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    float* c = C + (size_t)row * N + col;
    *c = simtlab::axpby(acc, alpha, beta, c);
  }
}
