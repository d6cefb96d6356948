// Rung 1 - WMMA (tensor cores): one warp computes one 16x16 tile of C with
// nvcuda::wmma 16x16x16 fragments (fp16 or bf16 in, fp32 accumulate), loading
// its fragments straight from global memory. Each HMMA does 4096 multiply-adds
// where a CUDA-core FFMA does one per lane, so even this naive kernel should
// beat the best fp32 SIMT GEMM; it is bound by its uncached, unshared loads.
// A warp whose tile hangs over an edge (or whose rows are not 32-byte aligned)
// stages its fragments through a zero-padded shared tile instead.
#include <mma.h>
#include "simtlab_tc.cuh"

template <int DT, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N)
gemm_tc_wmma(int M, int N, int K, const typename simtlab::Elem<DT>::T* __restrict__ A,
             const typename simtlab::Elem<DT>::T* __restrict__ B, float* __restrict__ C) {
  using namespace nvcuda;
  using T = typename simtlab::Elem<DT>::T;
  A += (size_t)blockIdx.z * M * K, B += (size_t)blockIdx.z * K * N, C += (size_t)blockIdx.z * M * N;  // batch z
  constexpr int WARPS = WARPS_M * WARPS_N;
  __shared__ __align__(32) T sa[WARPS][16 * 16];
  __shared__ __align__(32) T sb[WARPS][16 * 16];
  __shared__ __align__(32) float sc[WARPS][16 * 16];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tm = (blockIdx.y * WARPS_M + warp / WARPS_N) * 16;
  const int tn = (blockIdx.x * WARPS_N + warp % WARPS_N) * 16;
  if (tm >= M || tn >= N) return;  // whole warps only: nothing below synchronises the block

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
  wmma::fill_fragment(acc, 0.0f);
  const bool direct = tm + 16 <= M && tn + 16 <= N && K % 16 == 0 && N % 16 == 0 &&
                      reinterpret_cast<size_t>(A) % 32 == 0 && reinterpret_cast<size_t>(B) % 32 == 0;
  if (direct) {
    for (int k = 0; k < K; k += 16) {
      wmma::load_matrix_sync(a, A + (size_t)tm * K + k, K);
      wmma::load_matrix_sync(b, B + (size_t)k * N + tn, N);
      wmma::mma_sync(acc, a, b, acc);
    }
  } else {
    for (int k = 0; k < K; k += 16) {
      for (int i = lane; i < 256; i += 32) {
        const int r = i / 16, c = i % 16;
        sa[warp][i] = (tm + r < M && k + c < K) ? A[(size_t)(tm + r) * K + k + c] : simtlab::Elem<DT>::zero();
        sb[warp][i] = (k + r < K && tn + c < N) ? B[(size_t)(k + r) * N + tn + c] : simtlab::Elem<DT>::zero();
      }
      __syncwarp();
      wmma::load_matrix_sync(a, sa[warp], 16);
      wmma::load_matrix_sync(b, sb[warp], 16);
      wmma::mma_sync(acc, a, b, acc);
      __syncwarp();
    }
  }
  if (direct && reinterpret_cast<size_t>(C) % 32 == 0) {
    wmma::store_matrix_sync(C + (size_t)tm * N + tn, acc, N, wmma::mem_row_major);
  } else {
    wmma::store_matrix_sync(sc[warp], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < 256; i += 32) {
      const int r = i / 16, c = i % 16;
      if (tm + r < M && tn + c < N) C[(size_t)(tm + r) * N + tn + c] = sc[warp][i];
    }
  }
}
