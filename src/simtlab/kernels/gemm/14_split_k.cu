// Rung 14 - split-K and small tiles on the CUDA cores, for the fp32 shapes models run that are not
// big squares. What changed from rung 8 (warp tiles, register-staged transposed A):
//  * K split over a cluster of S blocks (S chosen per launch); each parks its partial tile in
//    shared memory and every block sums its band from all S blocks' (DSMEM), in one fixed order;
//  * each thread's sums are windowed: WINDOW slices summed plainly, each window then added with
//    Kahan compensation - a handful of roundings however long K is, where one sequential sum of
//    K products loses sqrt(K) of them (8x SGEMM's error at K = 65536 for rung 10);
//  * tiles from 128x8 (a GEMV's), either operand row-major or a transposed view (read in place,
//    transposed into shared memory as it is staged), C row-major or column-major (TC: small M runs
//    swapped, C^T = B^T A^T), rows 16-byte aligned or not (AV, BV);
//  * C = alpha * A @ B + beta * C, C read only where beta != 0.
// What it should buy: SGEMM's speed where one sequential tile leaves SMs idle (skinny, GEMV, long
// K) at an error below SGEMM's.
#include "simtlab_gemm.cuh"
#include "simtlab_split.cuh"

namespace simtlab {

// A tile of R rows x CC contiguous columns of a matrix stored with row stride `ld` (rows past
// `rows`, columns past `cols` zero), staged in registers: PER chunks of 4 a thread.
template <int R, int CC, int THREADS, int V>
struct Staged {
  static constexpr int CHUNKS = R * CC / 4, PER = (CHUNKS + THREADS - 1) / THREADS;
  float4 v[PER];

  __device__ __forceinline__ void load(const float* g, long long ld, int row0, int rows, int col0, int cols, int tid) {
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int idx = tid + i * THREADS, r = idx / (CC / 4), c = idx % (CC / 4) * 4;
      const int gr = row0 + r, gc = col0 + c;
      const bool in = idx < CHUNKS && gr < rows;
      v[i] = load4<V == 16>(g + (in ? (long long)gr * ld + gc : 0), in ? cols - gc : 0);
    }
  }
  // into s[row][col] (row stride LD), or transposed into s[col][row] (TRANS)
  template <int LD, bool TRANS>
  __device__ __forceinline__ void store(float* s, int tid) const {
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int idx = tid + i * THREADS, r = idx / (CC / 4), c = idx % (CC / 4) * 4;
      if (idx >= CHUNKS) continue;
      if constexpr (TRANS) {
        s[(c + 0) * LD + r] = v[i].x, s[(c + 1) * LD + r] = v[i].y;
        s[(c + 2) * LD + r] = v[i].z, s[(c + 3) * LD + r] = v[i].w;
      } else {
        *reinterpret_cast<float4*>(s + r * LD + c) = v[i];
      }
    }
  }
};

}  // namespace simtlab

// C (M x N) = alpha * A (M x K) @ B (K x N) + beta * C. TA 0: A row-major, 1: the transposed view of
// a row-major K x M matrix; TB 0: B row-major, 1: the transposed view of an N x K matrix; TC 1: C
// column-major (the swapped product's). Grid (N / BN, M / BM, S) in clusters of (1, 1, S).
template <int BM, int BN, int BK, int TM, int TN, int TA, int TB, int AV, int BV, int TC, int WINDOW>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_split_k(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
             float* __restrict__ C) {
  constexpr int TX = BN / TN, THREADS = (BM / TM) * TX;
  constexpr int LDA = BM + 4, LDB = BN + 4;  // shared rows [k][m], [k][n]: 16-byte aligned, padded
  constexpr int LDP = BN + 1;                // the parked tile's rows
  static_assert(BM % TM == 0 && BN % TN == 0 && TM % 4 == 0 && TN % 4 == 0, "thread tiles of 4-wide vectors");
  static_assert(BK % 4 == 0 && BM % 4 == 0 && BN % 4 == 0, "tiles of 4-wide chunks");
  static_assert(AV == 16 || AV == 4, "AV, BV: 16 (rows on 16-byte boundaries, 4-wide loads) or 4");
  static_assert(BV == 16 || BV == 4, "AV, BV: 16 (rows on 16-byte boundaries, 4-wide loads) or 4");
  static_assert(WINDOW >= 1, "slices summed plainly before each compensated addition");
  // (dynamic: the two slices, [2][BK][LDA] then [2][BK][LDB], or the parked tile after them, the larger)
  extern __shared__ __align__(16) float smem[];
  float* As = smem;
  float* Bs = smem + 2 * BK * LDA;

  const unsigned S = simtlab::cluster_blocks(), split = simtlab::cluster_rank();
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = (K + BK - 1) / BK;
  const int kt0 = (int)((long long)KT * split / S), kt1 = (int)((long long)KT * (split + 1) / S);

  // A's slice is [k][m] in shared memory: staged as it lies (TA 1: K x M rows) or transposed (TA 0)
  simtlab::Staged<TA ? BK : BM, TA ? BM : BK, THREADS, AV> a_st;
  simtlab::Staged<TB ? BN : BK, TB ? BK : BN, THREADS, BV> b_st;
  auto load = [&](int kt) {
    const int k0 = kt * BK;
    if constexpr (TA) a_st.load(A, M, k0, K, m0, M, tid);
    else a_st.load(A, K, m0, M, k0, K, tid);
    if constexpr (TB) b_st.load(B, K, n0, N, k0, K, tid);
    else b_st.load(B, N, k0, K, n0, N, tid);
  };
  auto store = [&](int buf) {
    a_st.template store<LDA, TA == 0>(As + buf * BK * LDA, tid);
    b_st.template store<LDB, TB == 1>(Bs + buf * BK * LDB, tid);
  };

  float win[TM][TN], tot[TM][TN], comp[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) win[i][j] = tot[i][j] = comp[i][j] = 0.0f;
  auto fold = [&]() {  // the window's sums into the totals, compensated (Kahan)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const float y = win[i][j] - comp[i][j], t = tot[i][j] + y;
        comp[i][j] = (t - tot[i][j]) - y;
        tot[i][j] = t;
        win[i][j] = 0.0f;
      }
  };

  if (kt0 < kt1) {
    load(kt0);
    store(0);
    __syncthreads();
  }
  for (int kt = kt0; kt < kt1; ++kt) {
    const int buf = (kt - kt0) & 1;
    if (kt + 1 < kt1) load(kt + 1);  // (in flight while this slice is multiplied)
    const float* as = As + buf * BK * LDA + ty * TM;
    const float* bs = Bs + buf * BK * LDB + tx * TN;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(a + i) = *reinterpret_cast<const float4*>(as + k * LDA + i);
#pragma unroll
      for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(b + j) = *reinterpret_cast<const float4*>(bs + k * LDB + j);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) win[i][j] = fmaf(a[i], b[j], win[i][j]);
    }
    if ((kt - kt0 + 1) % WINDOW == 0) fold();
    if (kt + 1 < kt1) {
      store(buf ^ 1);  // (the other buffer: its readers, last slice, all passed the barrier since)
      __syncthreads();
    }
  }
  fold();
  __syncthreads();  // every thread done with the slices: the parked tile takes their place

  float* parked = smem;  // [BM][LDP]
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) parked[(ty * TM + i) * LDP + tx * TN + j] = tot[i][j] - comp[i][j];
  if (S > 1) simtlab::cluster_barrier();
  else __syncthreads();

  // this block's band of rows, the S partial tiles summed in one order, then alpha / beta
  const int band = (BM + (int)S - 1) / (int)S, r0 = (int)split * band, rows = min(BM, r0 + band) - r0;
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(parked));
  for (int e = tid; e < rows * BN; e += THREADS) {
    const int r = r0 + (TC ? e % rows : e / BN), c = TC ? e / rows : e % BN;
    const int gm = m0 + r, gn = n0 + c;
    float v = 0.0f;
    for (unsigned p = 0; p < S; ++p) v += simtlab::load_peer(base + 4u * (r * LDP + c), p, S > 1);
    if (gm < M && gn < N) {
      float* out = C + (TC ? (size_t)gn * M + gm : (size_t)gm * N + gn);
      *out = simtlab::axpby(v, alpha, beta, out);
    }
  }
  if (S > 1) simtlab::cluster_barrier();  // no block leaves while a peer still reads its partial tile
}
