// Rung 7 - split-K and small tiles, for the shapes models run that are not big squares. What
// changed from rung 3 (mma.sync + ldmatrix on a cp.async ring):
//  * K is split over a cluster of S blocks (S chosen per launch) and over WK warps a block: each
//    sums its share into fp32 fragments, parks them in shared memory, and after one cluster
//    barrier every block adds its band of the tile from all S blocks' shared memory (DSMEM) and
//    stores it - no workspace, no second pass, no atomics, the same sums every run;
//  * tiles as small as 32x8 (BN a power of two from 8): a decode step's one row is one 8-wide
//    tile, not half of a 128x256 one, and a GEMV streams its matrix through the ring at HBM rate;
//  * either operand row-major or a transposed view (ldmatrix or its .trans form, per operand), and
//    C row-major or column-major (TC): small M runs swapped, C^T = B^T A^T, the long side on M;
//  * rows aligned to 16, 8, 4 or 2 bytes (AV, BV): odd N or K is read where it lies, no copies.
// What it should buy: every SM busy when the output has fewer tiles than SMs (skinny, decode,
// long K), and no call bound by padding copies or a 128x256 tile's fixed cost.
#include "simtlab_async.cuh"
#include "simtlab_split.cuh"
#include "simtlab_tc.cuh"

namespace simtlab {

// Element offset of 16-byte chunk c of row r in a tile whose rows hold NC chunks (a power of
// two): XOR-swizzled so that the 8 rows one ldmatrix phase reads land in 8 different 16-byte bank
// groups, and cp.async's 16-byte writes stay aligned.
template <int NC>
__device__ __forceinline__ int swizzled(int r, int c) {
  if constexpr (NC >= 8) return (r * NC + (c ^ (r & 7))) * 8;
  else return (r * NC + (c ^ ((r / (8 / NC)) & (NC - 1)))) * 8;
}

// One 16-byte chunk (8 elements from column `col` of a row with `cols` valid columns) into shared
// memory in pieces of V bytes, zeros past the row's end or for a row outside (`row_ok` false).
// `safe` is an address inside the operand, read by no copy, for the copies that write zeros.
template <int V, class T>
__device__ __forceinline__ void load_chunk(T* dst, const T* src, bool row_ok, int col, int cols, const T* safe) {
  if constexpr (V == 16) {
    const bool ok = row_ok && col < cols;
    cp_async16(dst, ok ? src : safe, ok);
  } else if constexpr (V == 8 || V == 4) {
    constexpr int E = V / 2;  // elements a piece
#pragma unroll
    for (int p = 0; p < 8; p += E) {
      const bool ok = row_ok && col + p < cols;
      if constexpr (V == 8) cp_async8(dst + p, ok ? src + p : safe, ok);
      else cp_async4(dst + p, ok ? src + p : safe, ok);
    }
  } else {  // V == 2: rows on 2-byte boundaries only (odd N or K): element loads through registers
    static_assert(V == 2, "AV, BV: 16, 8, 4 or 2 bytes");
    const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
    unsigned short* d = reinterpret_cast<unsigned short*>(dst);
#pragma unroll
    for (int e = 0; e < 8; ++e) d[e] = (row_ok && col + e < cols) ? __ldg(s + e) : (unsigned short)0;
  }
}

// A ROWS x COLS tile (COLS contiguous) of a row-major matrix with row stride `ld`, from (row0,
// col0), rows past `rows` and columns past `cols` zero.
template <int ROWS, int COLS, int V, int THREADS, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* g, long long ld, int row0, int rows, int col0, int cols,
                                          int tid) {
  constexpr int NC = COLS / 8, CHUNKS = ROWS * NC;
#pragma unroll
  for (int i = tid; i < CHUNKS; i += THREADS) {
    const int r = i / NC, c = i % NC, gr = row0 + r, gc = col0 + c * 8;
    load_chunk<V>(tile + swizzled<NC>(r, c), g + (long long)gr * ld + gc, gr < rows, gc, cols, g);
  }
}

}  // namespace simtlab

// C (M x N; batch `gridDim.z / S` of them, matrices back to back) = A (M x K) @ B (K x N).
// TA 0: A row-major (K contiguous), 1: the transposed view of a row-major K x M matrix; TB 0: B
// row-major (N contiguous), 1: the transposed view of an N x K matrix; TC 0: C row-major, 1:
// column-major (C^T row-major: the swapped product's). OUT 0 fp32, 1 fp16, 2 bf16. The grid is
// (N / BN, M / BM, batch x S) in clusters of (1, 1, S): a cluster's blocks split K.
template <int DT, int BM, int BN, int BK, int WM, int WN, int WK, int STAGES, int TA, int TB, int AV, int BV, int OUT,
          int TC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * WK * 32)
gemm_tc_split_k(int M, int N, int K, const typename simtlab::Elem<DT>::T* __restrict__ A,
                const typename simtlab::Elem<DT>::T* __restrict__ B, void* __restrict__ C) {
  using T = typename simtlab::Elem<DT>::T;
  constexpr int WARPS_N = BN / WN, THREADS = (BM / WM) * WARPS_N * WK * 32;
  constexpr int MI = WM / 16, NI = WN / 8, STEPS = BK / 16;  // mma tiles a warp; k16 steps a slice
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BM % WM == 0 && BN % WN == 0, "warp tiles of 16 x 8 mma tiles");
  static_assert((BM & (BM - 1)) == 0 && (BN & (BN - 1)) == 0 && BM >= 16 && BN >= 8, "tile sides: powers of two");
  static_assert(BK == 32 || BK == 64, "BK: 32 or 64 (k16 steps a slice, shared among the WK warps)");
  static_assert(WK >= 1 && STEPS % WK == 0, "WK divides a slice's k16 steps");
  static_assert(STAGES >= 2, "a ring of at least two slices");
  static_assert(OUT >= 0 && OUT <= 2 && (TA | TB | TC) <= 1, "OUT 0-2; TA, TB, TC 0 or 1");
  constexpr int A_TILE = BM * BK, B_TILE = BK * BN, STAGE = A_TILE + B_TILE;  // elements
  constexpr int LDP = BN + 4;  // row stride (floats) of the parked partial tiles

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);

  const unsigned S = simtlab::cluster_blocks(), split = simtlab::cluster_rank();
  const int batch = blockIdx.z / S;
  A += (size_t)batch * M * K, B += (size_t)batch * K * N;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wk = warp % WK, wn = (warp / WK) % WARPS_N * WN, wm = warp / WK / WARPS_N * WM;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  // this block's share of the K slices: [kt0, kt1) of KT
  const int KT = (K + BK - 1) / BK;
  const int kt0 = (int)((long long)KT * split / S), kt1 = (int)((long long)KT * (split + 1) / S);

  auto load_slice = [&](int slot, int k0) {
    T* As = smem + slot * STAGE;
    T* Bs = As + A_TILE;
    if constexpr (TA == 0) simtlab::load_tile<BM, BK, AV, THREADS>(As, A, K, m0, M, k0, K, tid);
    else simtlab::load_tile<BK, BM, AV, THREADS>(As, A, M, k0, K, m0, M, tid);
    if constexpr (TB == 0) simtlab::load_tile<BK, BN, BV, THREADS>(Bs, B, N, k0, K, n0, N, tid);
    else simtlab::load_tile<BN, BK, BV, THREADS>(Bs, B, K, n0, N, k0, K, tid);
  };
  auto load_share = [&](int slot, int k) { load_slice(slot, kt0 * BK + k); };  // (k: from this block's first slice)

  float acc[MI][NI][4];
  simtlab::clear_fragments(acc);

  const int slices = kt1 - kt0;
  simtlab::ring_prologue<STAGES>(slices, BK, load_share);
  for (int kt = 0; kt < slices; ++kt) {
    simtlab::ring_advance<STAGES>(kt, slices, BK, load_share);
    const T* As = smem + (kt % STAGES) * STAGE;
    const T* Bs = As + A_TILE;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      if (s % WK != wk) continue;  // (warp-uniform: this warp's k16 steps of the slice)
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        if constexpr (TA == 0) {  // [m][k]: lanes 0-15 rows at chunk 2s, lanes 16-31 the same rows at 2s + 1
          simtlab::ldmatrix_x4(a[i], As + simtlab::swizzled<BK / 8>(wm + 16 * i + lane % 16, 2 * s + lane / 16));
        } else {  // [k][m], transposed on the way: matrices (m 0-7 | 8-15) x (k 0-7 | 8-15)
          simtlab::ldmatrix_x4_trans(
              a[i], As + simtlab::swizzled<BM / 8>(16 * s + lane % 8 + 8 * (lane / 16), (wm + 16 * i) / 8 + lane / 8 % 2));
        }
      }
#pragma unroll
      for (int j = 0; j < NI; j += 2) {
        if (j + 1 < NI) {  // two 8-column tiles
          unsigned t[4];
          if constexpr (TB == 0)  // [k][n], transposed on the way
            simtlab::ldmatrix_x4_trans(t, Bs + simtlab::swizzled<BN / 8>(16 * s + lane % 16, (wn + 8 * j) / 8 + lane / 16));
          else  // [n][k]
            simtlab::ldmatrix_x4(t, Bs + simtlab::swizzled<BK / 8>(wn + 8 * j + lane % 8 + 8 * (lane / 16), 2 * s + lane / 8 % 2));
          b[j][0] = t[0], b[j][1] = t[1], b[j + 1][0] = t[2], b[j + 1][1] = t[3];
        } else {  // the last of an odd count (lanes 0-15 give the addresses)
          if constexpr (TB == 0)
            simtlab::ldmatrix_x2_trans(b[j], Bs + simtlab::swizzled<BN / 8>(16 * s + lane % 16, (wn + 8 * j) / 8));
          else
            simtlab::ldmatrix_x2(b[j], Bs + simtlab::swizzled<BK / 8>(wn + 8 * j + lane % 8, 2 * s + lane / 8 % 2));
        }
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) simtlab::mma_16816<DT>(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  simtlab::cp_async_wait<0>();
  __syncthreads();  // the ring is free: the partial tiles take its place

  // Each warp parks its fragments: WK partial tiles a block, fp32, rows of LDP floats.
  float* parked = reinterpret_cast<float*>(smem_raw);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<float2*>(parked + (wk * BM + wm + 16 * i + g + 8 * h) * LDP + wn + 8 * j + 2 * t) =
            make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
  if (S > 1) simtlab::cluster_barrier();  // every block's partials visible to the cluster
  else __syncthreads();

  // This block's band of the tile's rows, summed over the cluster's blocks and the warps' shares
  // in one fixed order, then stored: consecutive threads on consecutive addresses of C.
  const int band = (BM + (int)S - 1) / (int)S, r0 = (int)split * band, rows = min(BM, r0 + band) - r0;
  const unsigned base = simtlab::smem_addr(parked);
  const size_t plane = (size_t)M * N;
  for (int e = tid; e < rows * BN; e += THREADS) {
    const int r = r0 + (TC ? e % rows : e / BN), c = TC ? e / rows : e % BN;
    const int gm = m0 + r, gn = n0 + c;
    float v = 0.0f;
    for (unsigned p = 0; p < S; ++p)
#pragma unroll
      for (int w = 0; w < WK; ++w) v += simtlab::load_peer(base + 4u * ((w * BM + r) * LDP + c), p, S > 1);
    if (gm < M && gn < N) {
      const size_t at = (size_t)batch * plane + (TC ? (size_t)gn * M + gm : (size_t)gm * N + gn);
      if constexpr (OUT == 0) static_cast<float*>(C)[at] = v;
      else if constexpr (OUT == 1) static_cast<__half*>(C)[at] = __float2half_rn(v);
      else static_cast<__nv_bfloat16*>(C)[at] = __float2bfloat16_rn(v);
    }
  }
  if (S > 1) simtlab::cluster_barrier();  // no block leaves while a peer still reads its partials
}
