// Rung 12 - 3xTF32 the Ampere way (sm_80 and later): rung 11's arithmetic without Hopper's
// machinery. What changed from rung 11:
//  * no pre-pass: fp32 tiles of A and B come straight into shared memory (a cp.async ring, STAGES
//    deep, rows padded so the fragment reads below are conflict-free), and each thread splits the
//    values it reads into big and small TF32 parts in registers: 4 bytes an element moved, not 12;
//  * mma.sync.m16n8k8 (tf32) from registers instead of wgmma from shared memory, a warp's 64x32 of
//    C in 16 fragments; the small products first, then big x big;
//  * each 16-deep slice sums in its own fragments and is then added to the running sums in fp32,
//    so the tensor cores' rounding does not build up with K (rung 11's promotion, every slice).
// What it should buy: 3xTF32's accuracy on any GPU from sm_80, with no scratch memory; on Hopper,
// how much of rung 11's speed is TMA, wgmma and clusters (this rung has none of them).
// ONCE 1 (default): each landed slice is split once in shared memory by all threads (1.38x, run
// d37bb3); ONCE 0 splits in registers on each read. Near the smallest normal: as rung 11, by a note
// pass and per-row/column exponents applied as values are split (gemm_tf32x3_exponents).
#include "simtlab_async.cuh"
#include "simtlab_tc.cuh"
#include "simtlab_tf32.cuh"

// Values near the smallest normal (simtlab_tf32.cuh): the note pass over A (na floats) and B (nb),
// the flag at scale[0] cleared before it; 16-byte loads where both are 16-byte aligned.
extern "C" __global__ void __launch_bounds__(256) gemm_tf32x3_note_tiny(const float* __restrict__ A, long long na,
                                                                        const float* __restrict__ B, long long nb,
                                                                        int* __restrict__ scale) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  const bool vec = (((size_t)A | (size_t)B) & 15) == 0;
  for (int which = 0; which < 2; ++which) {
    const float* x = which ? B : A;
    const long long n = which ? nb : na, groups = (n + 3) / 4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < groups; i += stride) {
      float4 v;
      if (vec && 4 * i + 3 < n) {
        v = reinterpret_cast<const float4*>(x)[i];
      } else {
        v.x = x[4 * i], v.y = 4 * i + 1 < n ? x[4 * i + 1] : 0.0f;
        v.z = 4 * i + 2 < n ? x[4 * i + 2] : 0.0f, v.w = 4 * i + 3 < n ? x[4 * i + 3] : 0.0f;
      }
      simtlab::note_tiny(v, scale);
    }
  }
}

// Where the note pass saw tiny values (scale[0] != 0; else every block returns at once): the
// exponent of each row of A into scale[1 + r] (blocks of y 0, a block a row) and of each column
// of B into scale[1 + M + n] (y 1, 32-column strips), for the main kernel to apply.
extern "C" __global__ void __launch_bounds__(256) gemm_tf32x3_exponents(const float* __restrict__ A, int M, int K,
                                                                        const float* __restrict__ B, int N,
                                                                        int* __restrict__ scale) {
  if (scale[0] == 0) return;
  __shared__ float red[8];
  __shared__ float col_max[8][32];
  if (blockIdx.y == 0) {
    for (int r = blockIdx.x; r < M; r += gridDim.x) {
      const int e = simtlab::row_exponent(A + (size_t)r * K, K, red);
      if (threadIdx.x == 0) scale[1 + r] = e;
    }
  } else {
    for (int n0 = 32 * blockIdx.x; n0 < N; n0 += 32 * gridDim.x) {
      const int n = n0 + threadIdx.x % 32, e = simtlab::column_exponent(B, K, N, N, n, col_max);
      if (n < N && threadIdx.x < 32) scale[1 + M + n] = e;
    }
  }
}

// (scale != nullptr and scale[0] != 0: rows of A and columns of B scaled by 2^-scale[1 + r] and
// 2^-scale[1 + M + n] as they are split, the sums by the inverse in the epilogue)
template <int BM, int BN, int WM, int WN, int STAGES, int ONCE, bool VEC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
gemm_tf32x3_mma(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                float beta, float* __restrict__ C, const int* __restrict__ scale) {
  constexpr int BK = 16, AS = BK + 4, BS = BN + 8;  // padded rows: fragment reads hit 32 banks
  constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
  constexpr int MI = WM / 16, NI = WN / 8;           // mma tiles per warp
  constexpr int A_STAGE = BM * AS, B_STAGE = BK * BS;
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BM % WM == 0 && BN % WN == 0, "warp tiles of 16x8 mma tiles");
  static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "16-byte chunks divide among threads");
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
  const bool scaled = scale != nullptr && scale[0] != 0;
  const int* const row_e = scale + 1;
  const int* const col_e = scale + 1 + M;
  auto row_exp = [&](int r) { return r < M ? row_e[r] : 0; };  // (only where `scaled`)
  auto col_exp = [&](int c) { return c < N ? col_e[c] : 0; };

  auto load_slice = [&](int slot, int k0) {
    float* As = smem + slot * (A_STAGE + B_STAGE);
    float* Bs = As + A_STAGE;
#pragma unroll
    for (int i = tid; i < BM * BK / 4; i += THREADS) {  // A: BM rows of 4 chunks
      const int r = i / 4, c = (i % 4) * 4, gr = m0 + r, gk = k0 + c;
      float* dst = As + r * AS + c;
      if (VEC) {
        const bool ok = gr < M && gk < K;
        simtlab::cp_async16(dst, ok ? A + (size_t)gr * K + gk : A, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[e] = (gr < M && gk + e < K) ? A[(size_t)gr * K + gk + e] : 0.0f;
      }
    }
#pragma unroll
    for (int i = tid; i < BK * BN / 4; i += THREADS) {  // B: BK rows of BN / 4 chunks
      const int r = i / (BN / 4), c = (i % (BN / 4)) * 4, gk = k0 + r, gn = n0 + c;
      float* dst = Bs + r * BS + c;
      if (VEC) {
        const bool ok = gk < K && gn < N;
        simtlab::cp_async16(dst, ok ? B + (size_t)gk * N + gn : B, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[e] = (gk < K && gn + e < N) ? B[(size_t)gk * N + gn + e] : 0.0f;
      }
    }
  };

  float acc[MI][NI][4];
  simtlab::clear_fragments(acc);

  const int KT = (K + BK - 1) / BK;
  simtlab::ring_prologue<STAGES>(KT, BK, load_slice);  // STAGES-1 slices in flight
  float* const small_tiles = smem + STAGES * (A_STAGE + B_STAGE);  // ONCE: this slice's small parts
  for (int kt = 0; kt < KT; ++kt) {
    simtlab::ring_advance<STAGES>(kt, KT, BK, load_slice);  // slice kt in; slice kt + STAGES - 1 issued

    float* const As = smem + (kt % STAGES) * (A_STAGE + B_STAGE);
    float* const Bs = As + A_STAGE;
    if constexpr (ONCE) {  // big in place of the fp32 values, small into the side tiles; padding too
      float4* tile = reinterpret_cast<float4*>(As);
      float4* side = reinterpret_cast<float4*>(small_tiles);
#pragma unroll
      for (int i = tid; i < (A_STAGE + B_STAGE) / 4; i += THREADS) {
        float4 v = tile[i];
        if (scaled) {  // (a 4-float group lies in one row of A, or one row of B: 4 columns)
          const int f = 4 * i;
          if (f < A_STAGE) {
            const int e = -row_exp(m0 + f / AS);
            v = make_float4(ldexpf(v.x, e), ldexpf(v.y, e), ldexpf(v.z, e), ldexpf(v.w, e));
          } else {
            const int c = n0 + (f - A_STAGE) % BS;
            v = make_float4(ldexpf(v.x, -col_exp(c)), ldexpf(v.y, -col_exp(c + 1)), ldexpf(v.z, -col_exp(c + 2)),
                            ldexpf(v.w, -col_exp(c + 3)));
          }
        }
        float4 hi, lo;
        simtlab::split_tf32(v.x, hi.x, lo.x);
        simtlab::split_tf32(v.y, hi.y, lo.y);
        simtlab::split_tf32(v.z, hi.z, lo.z);
        simtlab::split_tf32(v.w, hi.w, lo.w);
        tile[i] = hi, side[i] = lo;
      }
      __syncthreads();
    }
    float part[MI][NI][4];  // this slice's sums, promoted into acc below
    simtlab::clear_fragments(part);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned a_big[MI][4], a_small[MI][4], b_big[NI][2], b_small[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {  // rows g and g + 8, columns t and t + 4 of a 16x8 tile
        const int at = (wm + 16 * i + g) * AS + kk + t;
        const int off[4] = {0, 8 * AS, 4, 8 * AS + 4};
        if constexpr (ONCE) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            a_big[i][e] = __float_as_uint(As[at + off[e]]), a_small[i][e] = __float_as_uint(small_tiles[at + off[e]]);
        } else {
          float v[4] = {As[at], As[at + off[1]], As[at + off[2]], As[at + off[3]]};
          if (scaled) {  // rows g (values 0, 2) and g + 8 (1, 3)
            const int r = m0 + wm + 16 * i + g, e0 = -row_exp(r), e1 = -row_exp(r + 8);
            v[0] = ldexpf(v[0], e0), v[1] = ldexpf(v[1], e1), v[2] = ldexpf(v[2], e0), v[3] = ldexpf(v[3], e1);
          }
          simtlab::split_tf32_bits(v, a_big[i], a_small[i]);
        }
      }
#pragma unroll
      for (int j = 0; j < NI; ++j) {  // k rows t and t + 4, column g of an 8x8 tile
        const int at = (kk + t) * BS + wn + 8 * j + g;
        if constexpr (ONCE) {
          const float* side = small_tiles + A_STAGE;
          b_big[j][0] = __float_as_uint(Bs[at]), b_big[j][1] = __float_as_uint(Bs[at + 4 * BS]);
          b_small[j][0] = __float_as_uint(side[at]), b_small[j][1] = __float_as_uint(side[at + 4 * BS]);
        } else {
          float v[2] = {Bs[at], Bs[at + 4 * BS]};
          if (scaled) {  // column g of the 8x8 tile
            const int e = -col_exp(n0 + wn + 8 * j + g);
            v[0] = ldexpf(v[0], e), v[1] = ldexpf(v[1], e);
          }
          simtlab::split_tf32_bits(v, b_big[j], b_small[j]);
        }
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          simtlab::mma_1688_tf32(part[i][j], a_small[i], b_big[j]);
          simtlab::mma_1688_tf32(part[i][j], a_big[i], b_small[j]);
          simtlab::mma_1688_tf32(part[i][j], a_big[i], b_big[j]);
        }
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
  }
  simtlab::cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the 16x8 tile, columns 2t and 2t + 1
        const int r = m0 + wm + 16 * i + g + 8 * h, c = n0 + wn + 8 * j + 2 * t;
        if (r >= M || c >= N) continue;
        float* p = C + (size_t)r * N + c;
        const bool pair = c + 1 < N;
        float s0 = acc[i][j][2 * h], s1 = acc[i][j][2 * h + 1];
        if (scaled) s0 = ldexpf(s0, row_exp(r) + col_exp(c)), s1 = ldexpf(s1, row_exp(r) + col_exp(c + 1));
        float v0 = alpha * s0, v1 = alpha * s1;
        if (beta != 0.0f) {  // (beta 0: C is not read, as BLAS)
          v0 += beta * p[0];
          if (pair) v1 += beta * p[1];
        }
        if (VEC) {  // N a multiple of 4: c even, the pair 8-byte aligned
          *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
        } else {
          p[0] = v0;
          if (pair) p[1] = v1;
        }
      }
}
