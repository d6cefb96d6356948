// Rung 11 - stream-K: rung 10's tiles and pipeline on a persistent grid that removes the ragged
// last wave. What changed:
//  * whole tiles leave a last wave only partly full: 4096^3 at 128x256 is 512 tiles for 132
//    SMs holding one block each, 3.88 waves, so through the fourth 16 SMs are idle (~3%;
//    8192^3: 15.5 waves). cuBLAS's 256x128 tiles have the same 3% to lose;
//  * here one block per resident slot walks whole tiles (grouped as rung 10) for all but the
//    last one-and-a-bit waves; the BK slices of the remaining tiles are then dealt out evenly,
//    each block a contiguous run that may start and end inside a tile, so every block ends
//    within a slice of the others;
//  * a tile cut between two blocks is finished by the block holding its first slices (its
//    run's last piece): the other block runs the tile's later slices as its run's *first*
//    piece, leaves the partial sums in a workspace (one partial tile per block, coalesced
//    16-byte stores) and raises a flag; the finisher waits for the flag (long since raised),
//    adds the partials and stores with alpha and beta. An fp32 tile takes ~1.3 M cycles here,
//    so moving 128 KiB of partials out and back costs well under 1% - unlike on the tensor
//    cores, whose tiles are 20x shorter (the tensor-core stream-K rung did not pay there).
// Flags carry the launch's epoch (1, 2, ... from the host), so they are never cleared. The grid
// must be resident at once (the host sizes it from the occupancy); a finisher that waits far
// longer than any tile takes traps, so a grid that is not resident fails instead of hanging.
#include "gemm/09_multistage.cu"

namespace simtlab {
namespace stream_k {

// Tile u of the grouped order (rung 10): GROUP_M tile rows walked column by column.
template <int GROUP_M>
__device__ __forceinline__ void tile_origin(int u, int tiles_m, int tiles_n, int BM, int BN, int& bm, int& bn) {
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (u / per_group) * GROUP_M, in_group = u % per_group;
  const int rows = min(tiles_m - first_m, GROUP_M);
  bm = (first_m + in_group % rows) * BM;
  bn = (in_group / rows) * BN;
}

__device__ __forceinline__ void raise_flag(int* flag, int epoch) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(epoch) : "memory");
}

__device__ __forceinline__ void wait_flag(const int* flag, int epoch) {
  int seen;
  for (long long spins = 0;; ++spins) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
    if (seen == epoch) return;
    if (spins > (1ll << 26)) __trap();  // ~10 s: the partner block never ran (grid not resident)
    __nanosleep(128);
  }
}

__device__ __forceinline__ int fresh_tid() {  // (volatile: read again, not kept from before)
  int r;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(r));
  return r;
}

__device__ __forceinline__ int fresh_block() {
  int r;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(r));
  return r;
}

// The end of a piece (tile u, slices [k0, k1) of KT) once its slices are in acc: a tile's later
// slices - the first piece of a block's run (a run is longer than a tile) - leave their partial
// sums for the previous block, which holds the tile's first slices as its run's last piece and
// adds them before it stores; whole tiles just store.
template <class T, int GROUP_M, bool VEC>
__device__ __forceinline__ void finish_piece(float (&acc)[T::TM][T::TN], int M, int N, int KT, float alpha,
                                             float beta, float* C, float4* partials, int* flags, int epoch, int u,
                                             int k0, int k1) {
  constexpr int VALUES = T::TM * T::TN / 4;  // float4 of accumulators per thread
  const int tid = fresh_tid(), block = fresh_block();
  // partials in [block][value][thread] order: coalesced 16-byte stores and loads
  float4* mine = partials + (size_t)block * VALUES * T::THREADS + tid;
  if (k0 > 0) {
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::WNITER; ++j)
        __stcg(mine + (i * T::WNITER + j) * T::THREADS,
               make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    __syncthreads();  // every thread's partials issued before the flag ...
    if (tid == 0) {
      __threadfence();  // ... and visible at GPU scope
      raise_flag(flags + block, epoch);
    }
    return;
  }
  const bool add = k1 < KT;  // the next block has the rest of this tile: add its partials as we store
  if (add) {
    if (tid == 0) wait_flag(flags + block + 1, epoch);
    __syncthreads();
  }
  const float4* theirs = mine + VALUES * T::THREADS;
  int bm, bn;
  tile_origin<GROUP_M>(u, (M + T::BM - 1) / T::BM, (N + T::BN - 1) / T::BN, T::BM, T::BN, bm, bn);
  const warptile::Coord c = warptile::coord<T>(tid);
  // (rung 10's store_tile with the partials added a float4 at a time, each load next to its
  // store: loading all 32 first would need 128 registers beside the accumulators)
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
    const int row = bm + c.wm + (i / 4) * T::SUB_M + c.lm + i % 4;
#pragma unroll
    for (int j = 0; j < T::WNITER; ++j) {
      const int col = bn + c.wn + j * T::SUB_N + c.ln;
      float4 v = make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
      if (add) {
        const float4 p = __ldcg(theirs + (i * T::WNITER + j) * T::THREADS);
        v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
      }
      store4<VEC>(C + (size_t)row * N + col, row < M ? N - col : 0, v, alpha, beta);
    }
  }
}

}  // namespace stream_k
}  // namespace simtlab

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER, int STAGES, int MINB, int GROUP_M, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
gemm_stream_k(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
              float* __restrict__ C, float4* __restrict__ partials, int* __restrict__ flags, int epoch) {
  using T = simtlab::warptile::Tile<BM, BN, BK, WM, WN, WMITER, WNITER>;
  namespace sk = simtlab::stream_k;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  // This block's pieces: whole tiles round robin for all but the last one-and-a-bit waves (all
  // of them when the waves come out even, or with less than two waves' work, as rung 10), then
  // an even share of the remaining tiles' slices as one run [it, e) - int: the region is under
  // two waves of tiles (the host checks its slices fit).
  // The schedule lives in shared memory (thread 0 sets and moves it, the barrier at the top of
  // each piece publishes it; the piece itself stays there until the next piece's barrier), and
  // what the piece's end needs is worked out again after the main loop (thread and tile
  // coordinates from fresh special-register reads): nothing is held in registers through the
  // main loop but what rung 10 holds, so the 128 accumulators keep their room.
  struct Schedule {
    int next_tile, next_slice, whole, end;  // the cursor: next whole tile, next split slice, run end
    int u, k0, k1;                          // the piece being computed
  };
  __shared__ Schedule sch;
  if (threadIdx.x == 0) {
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), KT = (K + BK - 1) / BK;
    const int block = blockIdx.x, blocks = gridDim.x;
    const bool split = tiles % blocks != 0 && tiles > blocks;
    sch.whole = split ? (tiles / blocks - 1) * blocks : tiles;
    const int total = (tiles - sch.whole) * KT, base = total / blocks, extra = total % blocks;
    sch.next_tile = block;
    sch.next_slice = block * base + min(block, extra);
    sch.end = sch.next_slice + base + (block < extra);
  }
  for (;;) {
    __syncthreads();  // (and the previous piece's last slice is read by every warp before it is refilled)
    const int tid = sk::fresh_tid(), KT = (K + BK - 1) / BK;
    int u = sch.next_tile, k0 = 0, k1 = KT;
    if (u >= sch.whole) {
      const int it = sch.next_slice, e = sch.end;
      if (it >= e) break;
      u = sch.whole + it / KT, k0 = it % KT;
      k1 = min(KT, k0 + (e - it));
    }
    __syncthreads();  // everyone has read the cursor
    if (tid == 0) {
      if (u < sch.whole) sch.next_tile = u + gridDim.x; else sch.next_slice += k1 - k0;
      sch.u = u, sch.k0 = k0, sch.k1 = k1;
    }
    {
      int bm, bn;
      sk::tile_origin<GROUP_M>(u, (M + BM - 1) / BM, (N + BN - 1) / BN, BM, BN, bm, bn);
      const simtlab::multistage::SliceLoader<T, VEC> loader(A, B, M, N, K, bm, bn, tid);
      float acc[T::TM][T::TN] = {{0.0f}};
      simtlab::multistage::accumulate<T, STAGES, VEC>(loader, simtlab::warptile::coord<T>(tid), acc, k0, k1, smem);
      sk::finish_piece<T, GROUP_M, VEC>(acc, M, N, (K + BK - 1) / BK, alpha, beta, C, partials, flags, epoch, sch.u,
                                        sch.k0, sch.k1);
    }
  }
}
