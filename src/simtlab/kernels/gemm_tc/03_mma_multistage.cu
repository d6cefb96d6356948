// Rung 3 - the Ampere way: mma.sync.m16n8k16 on fragments read
// with ldmatrix, fed by a STAGES-deep cp.async ring. Three changes from rung 2:
//  * cp.async copies global -> shared without registers, STAGES-1 slices ahead,
//    so loads overlap the tensor-core work (rung 9 of the fp32 ladder, again);
//  * ldmatrix.x4 gives a warp four 8x8 tiles in one instruction, already in the
//    register layout mma expects (.trans turns row-major B into the "col"
//    operand), instead of WMMA's opaque fragment loads;
//  * the shared tiles are XOR-swizzled by 16-byte chunk instead of padded: the
//    eight rows an ldmatrix phase reads land in eight different bank groups,
//    and cp.async's 16-byte writes stay aligned.
// Accumulators live in registers as mma's 16x8 fragments: thread (g = lane/4,
// t = lane%4) holds C[g][2t..2t+1] and C[g+8][2t..2t+1] of each.
// VEC=false (K or N not a multiple of 8, unaligned rows) fills the same
// swizzled tiles with bounds-checked element loads.
#include "simtlab_async.cuh"
#include "simtlab_tc.cuh"

template <int DT, int BM, int BN, int WM, int WN, int STAGES, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
gemm_tc_mma(int M, int N, int K, const typename simtlab::Elem<DT>::T* __restrict__ A,
            const typename simtlab::Elem<DT>::T* __restrict__ B, float* __restrict__ C) {
  using T = typename simtlab::Elem<DT>::T;
  A += (size_t)blockIdx.z * M * K, B += (size_t)blockIdx.z * K * N, C += (size_t)blockIdx.z * M * N;  // batch z
  constexpr int BK = 32;                                 // 4 chunks of 8 elements per A row
  constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int MI = WM / 16, NI = WN / 8;               // mma tiles per warp
  constexpr int BCH = BN / 8;                            // 16-byte chunks per B row
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: 16-row A tiles, pairs of 8-column B tiles");
  static_assert(BCH >= 8 && (BCH & (BCH - 1)) == 0, "B rows of 64, 128 or 256 elements (swizzle over 8 chunks)");
  static_assert((BM * 4) % THREADS == 0 && (BK * BCH) % THREADS == 0, "chunks divide among the threads");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  constexpr int A_STAGE = BM * BK, B_STAGE = BK * BN;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;

  // element offset of (row, 16-byte chunk) inside a stage's tile, swizzled
  auto a_off = [](int r, int c) { return r * BK + ((c ^ ((r >> 1) & 3)) << 3); };
  auto b_off = [](int r, int c) { return r * BN + ((c ^ (r & 7)) << 3); };

  auto load_slice = [&](int slot, int k0) {
    T* As = smem + slot * (A_STAGE + B_STAGE);
    T* Bs = As + A_STAGE;
#pragma unroll
    for (int i = tid; i < BM * 4; i += THREADS) {
      const int r = i / 4, c = i % 4, gr = m0 + r, gk = k0 + c * 8;
      T* dst = As + a_off(r, c);
      if (VEC) {
        const bool ok = gr < M && gk < K;
        simtlab::cp_async16(dst, ok ? A + (size_t)gr * K + gk : A, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dst[e] = (gr < M && gk + e < K) ? A[(size_t)gr * K + gk + e] : simtlab::Elem<DT>::zero();
      }
    }
#pragma unroll
    for (int i = tid; i < BK * BCH; i += THREADS) {
      const int r = i / BCH, c = i % BCH, gk = k0 + r, gn = n0 + c * 8;
      T* dst = Bs + b_off(r, c);
      if (VEC) {
        const bool ok = gk < K && gn < N;
        simtlab::cp_async16(dst, ok ? B + (size_t)gk * N + gn : B, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dst[e] = (gk < K && gn + e < N) ? B[(size_t)gk * N + gn + e] : simtlab::Elem<DT>::zero();
      }
    }
  };

  float acc[MI][NI][4];
  simtlab::clear_fragments(acc);

  const int KT = (K + BK - 1) / BK;
  simtlab::ring_prologue<STAGES>(KT, BK, load_slice);  // STAGES-1 slices in flight

  for (int kt = 0; kt < KT; ++kt) {
    simtlab::ring_advance<STAGES>(kt, KT, BK, load_slice);  // slice kt in; slice kt + STAGES - 1 issued

    const T* As = smem + (kt % STAGES) * (A_STAGE + B_STAGE);
    const T* Bs = As + A_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {  // lanes 0-15: rows 0-15 at k, lanes 16-31: the same rows at k+8
        const int r = wm + 16 * i + (lane % 16), c = (kk >> 3) + (lane / 16);
        simtlab::ldmatrix_x4(a[i], As + a_off(r, c));
      }
#pragma unroll
      for (int j = 0; j < NI; j += 2) {  // k rows kk..kk+15 of two 8-column tiles, transposed
        unsigned t[4];
        const int r = kk + (lane % 16), c = (wn + 8 * j) / 8 + (lane / 16);
        simtlab::ldmatrix_x4_trans(t, Bs + b_off(r, c));
        b[j][0] = t[0];
        b[j][1] = t[1];
        b[j + 1][0] = t[2];
        b[j + 1][1] = t[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) simtlab::mma_16816<DT>(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  simtlab::cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the 16x8 tile
        const int r = m0 + wm + 16 * i + g + 8 * h, c = n0 + wn + 8 * j + 2 * t;
        if (r >= M) continue;
        float* p = C + (size_t)r * N + c;
        if (VEC) {
          if (c < N) *reinterpret_cast<float2*>(p) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        } else {
          if (c < N) p[0] = acc[i][j][2 * h];
          if (c + 1 < N) p[1] = acc[i][j][2 * h + 1];
        }
      }
}
