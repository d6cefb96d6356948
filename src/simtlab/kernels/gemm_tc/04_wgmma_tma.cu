// Rung 4 - Hopper: wgmma fed by the tensor copy engine (TMA), sm_90a. What changed
// from rung 3:
//  * one thread issues a whole BMx64 slice of A and a 64xBN slice of B per stage
//    with cp.async.bulk.tensor (TMA): no address arithmetic, no registers, zeros
//    past the matrix edges, and the 128-byte swizzle written by the copy engine;
//  * each stage's bytes complete on an mbarrier (expect_tx), so the consumers wait
//    on "this slice has landed", not on their own copies;
//  * a warpgroup (4 warps) issues wgmma.m64nBNk16 reading A and B straight from
//    shared memory through matrix descriptors: no ldmatrix, no fragments in
//    registers except the 64xBN fp32 accumulators, and the multiply runs
//    asynchronously while the next one is queued (wait_group 1).
// BM/64 warpgroups share each B slice; the slot a finished slice frees is refilled
// STAGES slices ahead. Every thread both waits and computes (rung 5 splits roles).
// Needs K and N multiples of 8 (16-byte rows for the tensor maps); the host pads
// other shapes.
#include "simtlab_hopper.cuh"

template <int DT, int BM, int BN, int STAGES>
__global__ void __launch_bounds__(BM / 64 * 128, 1)
gemm_tc_wgmma(int M, int N, int K, const void* __restrict__ map_a, const void* __restrict__ map_b,
              float* __restrict__ C) {
  constexpr int BK = 64;                        // 64 16-bit values = one 128-byte swizzle row
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;
  constexpr int B_BLOCK = BK * 128;             // one 64-column block of a B slice (one TMA box)
  static_assert(DT == 0 || DT == 1, "fp16 or bf16 (TF32 runs on rung 5)");
  static_assert(BM % 64 == 0 && BM <= 256, "64 rows per warpgroup, at most 4 warpgroups");
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma N of 64, 128 or 256");
  extern __shared__ unsigned char smem_raw[];
  // 128-byte swizzle atoms are 1024 bytes: align the ring (the host asks for 1 KiB extra)
  unsigned char* smem = smem_raw + ((1024 - (simtlab::smem_u32addr(smem_raw) & 1023)) & 1023);
  simtlab::u64* full = reinterpret_cast<simtlab::u64*>(smem + STAGES * STAGE_BYTES);

  const int tid = threadIdx.x, wg = tid / 128;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, z = blockIdx.z;
  const int KT = (K + BK - 1) / BK;

  auto issue = [&](int kt) {  // one thread: announce the bytes, then start the copies
    const int slot = kt % STAGES;
    unsigned char* a = smem + slot * STAGE_BYTES;
    simtlab::mbar_arrive_expect_tx(&full[slot], STAGE_BYTES);
    simtlab::tma_load_3d(a, map_a, &full[slot], kt * BK, m0, z);
#pragma unroll
    for (int j = 0; j < BN / 64; ++j)
      simtlab::tma_load_3d(a + A_BYTES + j * B_BLOCK, map_b, &full[slot], n0 + 64 * j, kt * BK, z);
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) simtlab::mbar_init(&full[s], 1);
    simtlab::mbar_init_fence();
    simtlab::tensormap_acquire(map_a);
    simtlab::tensormap_acquire(map_b);
  }
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < STAGES && s < KT; ++s) issue(s);

  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

  for (int kt = 0; kt < KT; ++kt) {
    const int slot = kt % STAGES;
    simtlab::mbar_wait(&full[slot], (kt / STAGES) & 1);
    const unsigned a = simtlab::smem_u32addr(smem + slot * STAGE_BYTES) + wg * 64 * 128;
    const unsigned b = simtlab::smem_u32addr(smem + slot * STAGE_BYTES + A_BYTES);
    simtlab::wgmma_fence();
    simtlab::wgmma_slice<BN, DT, BK>(acc, a, b, B_BLOCK);  // 16 k per wgmma
    simtlab::wgmma_commit();
    simtlab::wgmma_wait<1>();  // slice kt-1's multiplies are done in this warpgroup ...
    __syncthreads();           // ... and in every warpgroup: its slot may be refilled
    if (tid == 0 && kt >= 1 && kt - 1 + STAGES < KT) issue(kt - 1 + STAGES);
  }
  simtlab::wgmma_wait<0>();

  // Accumulator layout of m64nN: warp w of the warpgroup holds rows 16w + lane/4 (+8); for
  // each 8-column group j, two neighbouring columns 8j + 2(lane%4).
  C += (size_t)z * M * N;
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int row = m0 + wg * 64 + warp * 16 + lane / 4, col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row + 8 * h, c = col + 8 * j;
      if (r < M && c < N)  // N is even here: the pair is inside when its first column is
        *reinterpret_cast<float2*>(C + (size_t)r * N + c) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
}
