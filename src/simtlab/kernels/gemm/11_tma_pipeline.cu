// Rung 11 - Hopper (sm_90): TMA tiles on mbarriers, and no block-wide barrier. What changed
// from rung 10:
//  * each BK = 32 slice of A and B arrives by two TMA instructions that one thread issues; the
//    other threads issue no copies at all - in rung 10 about one in nine of their instructions
//    was cp.async address and bounds arithmetic, and zero-filling past the edges is now the
//    copy engine's job;
//  * per-stage "full" and "empty" mbarriers replace __syncthreads: a warp waits only for the
//    bytes it needs and hands a stage back by itself, so one slow warp no longer idles the SM
//    at every slice (rung 10 runs one 8-warp block per SM). The issuing thread (warp 0) refills
//    the stage of slice kt-1 after computing slice kt, so it waits only for warps a whole slice
//    behind it. (A separate producer warp would make 9 warps, and the register file's four
//    quarters would then cap every thread at 168 registers: this tile needs ~200.)
//  * A lands untransposed, rows of 32 fp32 in the 128-byte swizzle: one LDS.128 gives 4 k of
//    one row. A thread's rows are lm + 4q (not 4 adjacent rows), so the rows a warp reads
//    together are adjacent and fall in different swizzled 16-byte chunks: conflict-free.
// Host side: TMA needs 16-byte row strides, so K and N must be multiples of 4 (others run on
// zero-padded copies, made inside the timed call).
#include "simtlab_hopper.cuh"
#include "simtlab_gemm.cuh"

// KV: k values per A load - 4 (LDS.128: fewest loads) or 2 (LDS.64: half the A registers, more
// room for the compiler to schedule and to avoid register-bank conflicts).
template <int BM, int BN, int WM, int WN, int WMITER, int WNITER, int STAGES, int GROUP_M, int KV>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, 1)
gemm_tma_pipeline(int M, int N, int K, float alpha, float beta, const void* __restrict__ map_a,
                  const void* __restrict__ map_b, float* __restrict__ C) {
  constexpr int BK = 32;  // one 128-byte swizzle row of A
  constexpr int WARPS_N = BN / WN, COMPUTE_WARPS = (BM / WM) * WARPS_N;
  constexpr int SUB_M = WM / WMITER, SUB_N = WN / WNITER;  // a warp sub-tile: 32 lanes of 4x4
  constexpr int LANES_N = SUB_N / 4, LANES_M = 32 / LANES_N;
  constexpr int TM = 4 * WMITER, TN = 4 * WNITER;
  constexpr int A_BYTES = BM * BK * 4, B_BYTES = BK * BN * 4, STAGE_BYTES = A_BYTES + B_BYTES;
  static_assert(LANES_M * 4 == SUB_M && LANES_M <= 8, "a sub-tile is 4 rows of LANES_M lanes, LANES_M <= 8");
  static_assert(KV == 2 || KV == 4, "A loads of 2 or 4 k values");
  static_assert(BM <= 256 && BN <= 256 && BN % 4 == 0 && A_BYTES % 1024 == 0, "TMA boxes of <= 256 rows/columns");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  simtlab::u64* full = reinterpret_cast<simtlab::u64*>(smem + STAGES * STAGE_BYTES);
  simtlab::u64* empty = full + STAGES;

  // grouped tile order, as rung 10
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
  const int first_m = group * GROUP_M, rows = min(tiles_m - first_m, GROUP_M);
  const int bm = (first_m + in_group % rows) * BM, bn = (in_group / rows) * BN;
  const int KT = (K + BK - 1) / BK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const bool issuer = threadIdx.x == 0;
  auto issue = [&](int kt) {  // the copies of slice kt, into its stage, once every warp released it
    const int slot = kt % STAGES;
    simtlab::mbar_wait(&empty[slot], ((kt / STAGES) & 1) ^ 1);  // the first round passes at once
    unsigned char* a = smem + slot * STAGE_BYTES;
    simtlab::mbar_arrive_expect_tx(&full[slot], STAGE_BYTES);
    simtlab::tma_load_2d(a, map_a, &full[slot], kt * BK, bm);            // BM rows x 32 k, swizzled
    simtlab::tma_load_2d(a + A_BYTES, map_b, &full[slot], bn, kt * BK);  // 32 k rows x BN
  };
  if (issuer) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      simtlab::mbar_init(&full[s], 1);
      simtlab::mbar_init(&empty[s], COMPUTE_WARPS);
    }
    simtlab::mbar_init_fence();
    simtlab::tensormap_acquire(map_a);
    simtlab::tensormap_acquire(map_b);
    for (int kt = 0; kt < min(STAGES - 1, KT); ++kt) issue(kt);  // the pipeline's head
  }
  __syncthreads();  // (the barriers are initialised)

  const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
  const int lm = lane / LANES_N, ln = (lane % LANES_N) * 4;
  // thread row i: wm + (i/4)*SUB_M + lm + LANES_M*(i%4); its 128-byte row's swizzle is (row & 7),
  // and (row & 7) = lm ^ ((LANES_M*(i%4)) & 7) because wm and SUB_M are multiples of 8
  const unsigned sw = (unsigned)(lm & 7) << 4;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int kt = 0; kt < KT; ++kt) {
    const int slot = kt % STAGES;
    simtlab::mbar_wait(&full[slot], (kt / STAGES) & 1);
    const unsigned char* As = smem + slot * STAGE_BYTES + (wm + lm) * 128;
    const float* Bs = reinterpret_cast<const float*>(smem + slot * STAGE_BYTES + A_BYTES) + wn + ln;
#pragma unroll
    for (int kg = 0; kg < BK / KV; ++kg) {  // KV k at a time: one LDS.64/LDS.128 per row of A
      const int kc = kg * KV / 4, within = (kg * KV % 4) * 4;  // 16-byte chunk of the row, byte inside it
      float a[TM][KV];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int r = (i / 4) * SUB_M + LANES_M * (i % 4);  // this row's offset from row wm + lm
        const unsigned chunk = ((unsigned)(kc ^ ((LANES_M * (i % 4)) & 7)) << 4) ^ sw;
        const unsigned char* p = As + r * 128 + chunk + within;
        if constexpr (KV == 4)
          *reinterpret_cast<float4*>(a[i]) = *reinterpret_cast<const float4*>(p);
        else
          *reinterpret_cast<float2*>(a[i]) = *reinterpret_cast<const float2*>(p);
      }
#pragma unroll
      for (int kk = 0; kk < KV; ++kk) {
        float b[TN];
#pragma unroll
        for (int j = 0; j < WNITER; ++j)
          *reinterpret_cast<float4*>(&b[4 * j]) =
              *reinterpret_cast<const float4*>(Bs + (KV * kg + kk) * BN + j * SUB_N);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i][kk], b[j], acc[i][j]);
      }
    }
    __syncwarp();  // every lane's reads of this stage are done ...
    if (lane == 0) simtlab::mbar_arrive(&empty[slot]);  // ... hand it back
    // slice kt+STAGES-1 goes into the stage slice kt-1 used: every warp has left slice kt-1 unless
    // it is a whole slice behind this one
    if (issuer && kt + STAGES - 1 < KT) issue(kt + STAGES - 1);
  }

  // C = alpha*acc + beta*C, one float4 per (row, WNITER block); N % 4 == 0 (host), so a
  // 4-group is wholly inside or outside
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = bm + wm + (i / 4) * SUB_M + lm + LANES_M * (i % 4);
#pragma unroll
    for (int j = 0; j < WNITER; ++j) {
      const int col = bn + wn + j * SUB_N + ln;
      simtlab::store4<true>(C + (size_t)row * N + col, row < M ? N - col : 0,
                            make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]),
                            alpha, beta);
    }
  }
}
