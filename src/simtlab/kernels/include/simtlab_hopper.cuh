// Hopper primitives for the gemm_tc rungs 4-6 (sm_90a) and conv2d rung 7 (sm_90), as inline PTX:
//  * mbarrier: a shared-memory barrier that also counts bytes - the tensor copy
//    engine "completes" bytes on it, a waiter spins on its phase parity;
//  * TMA: cp.async.bulk.tensor copies a whole box of a tensor (described by a
//    128-byte tensor map made on the host) into shared memory, swizzled, with
//    zeros outside the tensor - one thread issues it, no registers involved;
//  * wgmma: a warpgroup (4 warps) multiplies a 64xK16 tile of A by a K16xN tile
//    of B, both read from shared memory through 64-bit matrix descriptors,
//    asynchronously, into N/2 fp32 accumulators per thread;
//  * clusters: blocks of a cluster arrive on each other's mbarriers and receive
//    one TMA copy together (multicast); TMA stores copy shared memory to a tensor.
// wgmma's accumulator operand lists are written out once, in blocks of 32, for N up to 256.
#pragma once

namespace simtlab {

using u64 = unsigned long long;  // (NVRTC has no <cstdint>)

__device__ __forceinline__ unsigned smem_u32addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// --- mbarrier -------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(u64* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32addr(bar)), "r"(count) : "memory");
}

// Make the initialised barriers visible to the other threads and to the copy engine (async proxy).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}

// One arrival that also announces `bytes` still to come from the copy engine in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32addr(bar)), "r"(bytes)
               : "memory");
}

// A plain arrival (a consumer warpgroup releasing a slot).
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32addr(bar)) : "memory");
}

// Wait until the phase with parity `parity` has completed. SLEEP false: a thread whose phase is
// still open retries in a loop (YIELD, try_wait, branch). SLEEP true: it passes try_wait a suspend
// hint, which ptxas turns into NANOSLEEP.SYNCS - the warp sleeps until the barrier's phase
// completes (or 10 ms pass) instead of issuing instructions and reading the barrier meanwhile.
template <bool SLEEP = false>
__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {
  unsigned done;
  do {
    if constexpr (SLEEP)
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_u32addr(bar)), "r"(parity), "r"(10000000u)
          : "memory");
    else
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_u32addr(bar)), "r"(parity)
          : "memory");
  } while (!done);
}

// --- TMA ------------------------------------------------------------------------------------
// The tensor map lives in global memory, written by a host copy before the launch: acquire it
// for the tensor-map proxy once before the first copy that uses it.
__device__ __forceinline__ void tensormap_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"(map) : "memory");
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// A tensor map passed by value as a kernel parameter (`const __grid_constant__ TensorMap`): it
// travels with the launch, so no host copy to device memory precedes it (a launch can be
// captured in a CUDA graph) and no fence is needed; the copies read it through its parameter
// address. The 128 bytes are cuTensorMapEncodeTiled's, made on the host.
struct alignas(64) TensorMap {
  unsigned long long bits[16];
};
__device__ __forceinline__ void tensormap_prefetch(const TensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(&map) : "memory");
}

// Copy the box at element coordinates (c0, c1, c2) (innermost first) into shared memory at dst;
// the bytes complete on `bar`.
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, u64* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_u32addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32addr(bar))
      : "memory");
}

// The same for a 2-D tensor (an image: columns, rows); coordinates may be negative or past the
// end, and the copy engine writes zeros there.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, u64* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(smem_u32addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32addr(bar))
      : "memory");
}

// --- clusters (gemm_tc rung 6) ------------------------------------------------------------------
// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every block of the cluster (not .aligned: warps may arrive diverged).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of the same shared variable in the cluster's block `rank`.
__device__ __forceinline__ unsigned cluster_map(unsigned smem_addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
}

// An arrival on an mbarrier of any block of the cluster (an address from cluster_map).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// A float at an address from cluster_map: another block's shared memory (distributed shared memory).
__device__ __forceinline__ float ld_cluster_f32(unsigned cluster_addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(cluster_addr) : "memory");
  return v;
}

// Floats stored into block `rank`'s shared memory at `addr` (this block's offset of a shared
// variable), their bytes counted on that block's mbarrier at `bar`'s offset: a remote write the
// receiver waits for on its own barrier, no cluster barrier (the norms' and softmax's rung 6).
__device__ __forceinline__ void send_f32x4(const void* addr, u64* bar, unsigned rank, float4 v) {
  const unsigned to = cluster_map(smem_u32addr(addr), rank), at = cluster_map(smem_u32addr(bar), rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(to),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(at)
               : "memory");
}
__device__ __forceinline__ void send_f32x2(const void* addr, u64* bar, unsigned rank, float2 v) {
  const unsigned to = cluster_map(smem_u32addr(addr), rank), at = cluster_map(smem_u32addr(bar), rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(to),
               "f"(v.x), "f"(v.y), "r"(at)
               : "memory");
}

// `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned) copied from global
// into shared memory by the copy engine, no tensor map: the bytes complete on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32addr(bar))
               : "memory");
}

// tma_load_3d into the same shared offset of every block in `mask`, completing bytes on the
// mbarrier at `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_3d_multicast(void* dst, const void* map, u64* bar, int c0, int c1, int c2,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_u32addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32addr(bar)), "h"(mask)
      : "memory");
}

// --- TMA stores ---------------------------------------------------------------------------------
// Shared-memory writes made by threads become visible to the copy engine (the async proxy).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Copy a box from shared memory to the tensor at (c0, c1, c2); parts outside the tensor are dropped.
__device__ __forceinline__ void tma_store_3d(const void* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
               "r"(smem_u32addr(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// Two fp32 values rounded to nearest into one 32-bit pair of 16-bit floats, `lo` in the low
// half (the lower address): OUT 1 fp16, 2 bf16.
template <int OUT>
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  static_assert(OUT == 1 || OUT == 2, "OUT: 1 fp16, 2 bf16");
  unsigned d;
  if constexpr (OUT == 1)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Wait until at most N committed stores still read their shared source (it may be reused) ...
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// ... or are still writing to global memory.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// A barrier for `threads` threads (a multiple of 32) on hardware barrier `id` (0 is __syncthreads's).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrive on a named barrier without waiting (the other side waits with named_sync).
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// A flag between blocks of one grid: set after (release) and read before (acquire) the global
// data it guards, at GPU scope.
__device__ __forceinline__ void flag_release(int* flag, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ int flag_acquire(const int* flag) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

// --- wgmma ----------------------------------------------------------------------------------
// Matrix descriptor of a tile in the 128-byte-swizzle layout (bits 62-63 = 1): start address,
// leading-dimension byte offset and stride-dimension byte offset, each in 16-byte units.
//  K-major (A, rows of 64 16-bit values): lbo unused (16), sbo = 1024 (eight 128-byte rows).
//  MN-major (row-major B): lbo = bytes between 64-column blocks, sbo = 1024 (eight k rows).
// Built from its two 32-bit words: the low one (start address, leading byte offset) moves from
// slice to slice and k step to k step, the high one (stride byte offset, swizzle mode) never
// does. Stepping the low word alone cannot carry into the high one (shared addresses stay below
// 256 KiB), so a k step can be one 32-bit add instead of a 64-bit add and its moves.
__device__ __forceinline__ unsigned desc_sw128_lo(unsigned addr, unsigned lbo) {
  return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16);
}
__host__ __device__ constexpr unsigned desc_sw128_hi(unsigned sbo) { return (sbo >> 4) | (1u << 30); }
__device__ __forceinline__ u64 desc_join(unsigned lo, unsigned hi) { return ((u64)hi << 32) | lo; }
__device__ __forceinline__ u64 desc_sw128(unsigned addr, unsigned lbo, unsigned sbo) {
  return desc_join(desc_sw128_lo(addr, lbo), desc_sw128_hi(sbo));
}

// A pipeline's position: the ring slot of the next slice and the parity of that slot's barrier
// phase, kept as running values (a compare and two selects a slice) rather than worked out from a
// slice count by division.
template <int STAGES>
struct Ring {
  unsigned slot = 0, phase = 0;
  __device__ __forceinline__ void advance() {
    if (++slot == STAGES) slot = 0, phase ^= 1;
  }
};

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// Wait until at most N committed wgmma groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Registers a wgmma reads or writes asynchronously (accumulators, a register A operand): an empty
// asm that says each may change here, so the compiler keeps its own reads and writes of them on
// their side of the wgmma fences, commits and waits.
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Warpgroup register budget (sm_90a): a producer gives registers back, consumers take them.
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// D(64xN, fp32) = A(64xk) * B(kxN) + (scale_d ? D : 0), N = 32, 64, 128 or 256. The accumulators are
// N/2 asm operands %0.. with A's and B's descriptors and scale_d after them; the operand strings
// and lists below are written once, in blocks of 32, and an N takes the first N/64 blocks (N = 32:
// the first half-block).
// KTY is the shape's k and the types, TAIL the transpose immediates:
//  * f16/bf16 (DT 0/1): k16, A K-major, B MN-major (imm-trans-b = 1): TAIL ", 0, 1";
//  * tf32 (DT 2): k8, both operands K-major (tf32 has no transpose immediates): TAIL "".

#define SIMTLAB_WGMMA_R0H "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define SIMTLAB_WGMMA_D0H "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define SIMTLAB_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SIMTLAB_WGMMA_R1 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define SIMTLAB_WGMMA_R2 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "  \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define SIMTLAB_WGMMA_R3 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define SIMTLAB_WGMMA_D0 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define SIMTLAB_WGMMA_D1 , "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define SIMTLAB_WGMMA_D2 , "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define SIMTLAB_WGMMA_D3 , "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// One wgmma with the accumulator operand strings REGS and lists DREGS; A, B, SCALE: the numbers of
// the operands after them, as strings.
#define SIMTLAB_WGMMA(N, REGS, DREGS, A, B, SCALE, KTY, TAIL)                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n" N KTY " {" REGS "}, %" A ", %" B ", p, 1, 1" TAIL ";\n}\n" \
               : DREGS                                                                                \
               : "l"(a), "l"(b), "r"(scale_d))
#define SIMTLAB_WGMMA_M64N32(KTY, TAIL) \
  SIMTLAB_WGMMA("32", SIMTLAB_WGMMA_R0H, SIMTLAB_WGMMA_D0H, "16", "17", "18", KTY, TAIL)
#define SIMTLAB_WGMMA_M64N64(KTY, TAIL) \
  SIMTLAB_WGMMA("64", SIMTLAB_WGMMA_R0, SIMTLAB_WGMMA_D0, "32", "33", "34", KTY, TAIL)
#define SIMTLAB_WGMMA_M64N128(KTY, TAIL)                                                       \
  SIMTLAB_WGMMA("128", SIMTLAB_WGMMA_R0 SIMTLAB_WGMMA_R1, SIMTLAB_WGMMA_D0 SIMTLAB_WGMMA_D1, "64", "65", "66", \
                KTY, TAIL)
#define SIMTLAB_WGMMA_M64N256(KTY, TAIL)                                                                \
  SIMTLAB_WGMMA("256", SIMTLAB_WGMMA_R0 SIMTLAB_WGMMA_R1 SIMTLAB_WGMMA_R2 SIMTLAB_WGMMA_R3,                 \
                SIMTLAB_WGMMA_D0 SIMTLAB_WGMMA_D1 SIMTLAB_WGMMA_D2 SIMTLAB_WGMMA_D3, "128", "129", "130", KTY, TAIL)

// TRANS_A, TRANS_B: the 16-bit forms' transpose immediates, 1 where the operand is MN-major in
// shared memory (A as the transposed view of a K x M matrix; B row-major, the 16-bit default), 0
// where it is K-major (A row-major, the default; B as the transposed view of an N x K matrix, and
// always for tf32).
template <int N, int DT, int TRANS_A = 0, int TRANS_B = (DT < 2)>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], u64 a, u64 b, int scale_d) {
  static_assert(N == 32 || N == 64 || N == 128 || N == 256, "wgmma N of 32, 64, 128 or 256 here");
  static_assert(DT >= 0 && DT <= 2, "DT: 0 fp16, 1 bf16, 2 tf32");
  static_assert(DT < 2 || (TRANS_A == 0 && TRANS_B == 0), "tf32 reads both operands K-major (no transposes)");
#define SIMTLAB_WGMMA_16(M, KTY)                                          \
  if constexpr (TRANS_A == 0 && TRANS_B == 1) M(KTY, ", 0, 1");           \
  else if constexpr (TRANS_A == 0) M(KTY, ", 0, 0");                      \
  else if constexpr (TRANS_B == 1) M(KTY, ", 1, 1");                      \
  else M(KTY, ", 1, 0");
#define SIMTLAB_WGMMA_TYPES(M)                                          \
  if constexpr (DT == 0) { SIMTLAB_WGMMA_16(M, "k16.f32.f16.f16") }    \
  else if constexpr (DT == 1) { SIMTLAB_WGMMA_16(M, "k16.f32.bf16.bf16") } \
  else M("k8.f32.tf32.tf32", "");
  if constexpr (N == 32) {
    SIMTLAB_WGMMA_TYPES(SIMTLAB_WGMMA_M64N32)
  } else if constexpr (N == 64) {
    SIMTLAB_WGMMA_TYPES(SIMTLAB_WGMMA_M64N64)
  } else if constexpr (N == 128) {
    SIMTLAB_WGMMA_TYPES(SIMTLAB_WGMMA_M64N128)
  } else {
    SIMTLAB_WGMMA_TYPES(SIMTLAB_WGMMA_M64N256)
  }
#undef SIMTLAB_WGMMA_TYPES
#undef SIMTLAB_WGMMA_16
}

// D(64xN, fp32) = A(64x8, tf32) * B(8xN, tf32, K-major descriptor) + (scale_d ? D : 0), A from
// registers: a[0..3] of lane (g = lane / 4, t = lane % 4) of warp w hold A's rows 16w + g, 16w + g +
// 8 at k = t, then the same rows at k = t + 4 (the fragment of mma.sync's m16n8k8 tf32 form).
#define SIMTLAB_WGMMA_RS(N, REGS, DREGS, A0, A1, A2, A3, B, SCALE)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n" N "k8.f32.tf32.tf32 {" REGS "}, {%" A0 ", %" A1 ", %" A2     \
               ", %" A3 "}, %" B ", p, 1, 1;\n}\n"                                                               \
               : DREGS                                                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d))
template <int N>
__device__ __forceinline__ void wgmma_tf32_rs(float (&d)[N / 2], const unsigned (&a)[4], u64 b, int scale_d) {
  static_assert(N == 64 || N == 128, "wgmma N of 64 or 128 here");
  if constexpr (N == 64)
    SIMTLAB_WGMMA_RS("64", SIMTLAB_WGMMA_R0, SIMTLAB_WGMMA_D0, "32", "33", "34", "35", "36", "37");
  else
    SIMTLAB_WGMMA_RS("128", SIMTLAB_WGMMA_R0 SIMTLAB_WGMMA_R1, SIMTLAB_WGMMA_D0 SIMTLAB_WGMMA_D1, "64", "65", "66",
                     "67", "68", "69");
}

// D(64xN, fp32) = A(64x16, fp16 / bf16 from registers) * B(16xN, MN-major descriptor: row-major B, the
// 16-bit default) + (scale_d ? D : 0): a[0..3] of lane (g, t) of warp w hold A's rows 16w + g and
// 16w + g + 8 at k = 2t, 2t + 1, then the same rows at k = 2t + 8, 2t + 9 (mma.sync m16n8k16's A
// fragment) - an accumulator's pairs packed, with no trip through shared memory (attention's P V).
#define SIMTLAB_WGMMA_RS16(N, KTY, REGS, DREGS, A0, A1, A2, A3, B, SCALE)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SCALE ", 0;\n"                                             \
               "wgmma.mma_async.sync.aligned.m64n" N KTY " {" REGS "}, {%" A0 ", %" A1 ", %" A2 ", %" A3 "}, %" B \
               ", p, 1, 1, 1;\n}\n"                                                                            \
               : DREGS                                                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d))
template <int N, int DT>
__device__ __forceinline__ void wgmma_rs16(float (&d)[N / 2], const unsigned (&a)[4], u64 b, int scale_d) {
  static_assert(N == 64 || N == 128, "wgmma N of 64 or 128 here");
  static_assert(DT == 0 || DT == 1, "DT: 0 fp16, 1 bf16");
  if constexpr (N == 64) {
    if constexpr (DT == 0)
      SIMTLAB_WGMMA_RS16("64", "k16.f32.f16.f16", SIMTLAB_WGMMA_R0, SIMTLAB_WGMMA_D0, "32", "33", "34", "35", "36", "37");
    else
      SIMTLAB_WGMMA_RS16("64", "k16.f32.bf16.bf16", SIMTLAB_WGMMA_R0, SIMTLAB_WGMMA_D0, "32", "33", "34", "35", "36",
                         "37");
  } else {
    if constexpr (DT == 0)
      SIMTLAB_WGMMA_RS16("128", "k16.f32.f16.f16", SIMTLAB_WGMMA_R0 SIMTLAB_WGMMA_R1, SIMTLAB_WGMMA_D0 SIMTLAB_WGMMA_D1,
                         "64", "65", "66", "67", "68", "69");
    else
      SIMTLAB_WGMMA_RS16("128", "k16.f32.bf16.bf16", SIMTLAB_WGMMA_R0 SIMTLAB_WGMMA_R1,
                         SIMTLAB_WGMMA_D0 SIMTLAB_WGMMA_D1, "64", "65", "66", "67", "68", "69");
  }
}

// One K slice (128 bytes of each row: BK = 64 16-bit or 32 fp32 values) from the 128-byte-swizzled
// tiles at shared addresses a (64 rows of A, K-major) and b. Each wgmma takes 32 bytes of k
// (k16 of 16-bit, k8 of tf32): +32 bytes along A's rows per step. B is
//  * 16-bit (DT 0/1): BK rows, N-major in 64-column blocks of b_block bytes: +16 rows (2 KiB) a step;
//  * tf32 (DT 2): BN rows of B^T, K-major like A: +32 bytes a step.
template <int BN, int DT, int BK>
__device__ __forceinline__ void wgmma_slice(float (&acc)[BN / 2], unsigned a, unsigned b, unsigned b_block) {
  constexpr int STEPS = DT == 2 ? BK / 8 : BK / 16;
#pragma unroll
  for (int kk = 0; kk < STEPS; ++kk) {
    if constexpr (DT == 2)
      wgmma<BN, DT>(acc, desc_sw128(a + 32 * kk, 16, 1024), desc_sw128(b + 32 * kk, 16, 1024), 1);
    else
      wgmma<BN, DT>(acc, desc_sw128(a + 32 * kk, 16, 1024), desc_sw128(b + 2048 * kk, b_block, 1024), 1);
  }
}

// A warpgroup's m64nBN accumulators (fp32, row-major C of row stride N) straight from the
// registers: a thread holds rows row and row + 8, columns col + 8j and col + 8j + 1; bounds-checked.
// Column pairs go out as one 8-byte store (C's rows even and 8-byte aligned), or, with ANY_N, one
// value at a time where a pair is not 8-byte aligned or ends past the row (any N, any C).
template <int BN, bool ANY_N = false>
__device__ __forceinline__ void store_accumulators(float* C, const float (&acc)[BN / 2], int row, int col, int M,
                                                   int N) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = row + 8 * e, cc = col + 8 * j;
      if (r < M && cc < N) {
        float* p = C + (size_t)r * N + cc;
        if (!ANY_N || (!(reinterpret_cast<size_t>(p) & 7) && cc + 1 < N)) {
          *reinterpret_cast<float2*>(p) = make_float2(acc[4 * j + 2 * e], acc[4 * j + 2 * e + 1]);
        } else {
          p[0] = acc[4 * j + 2 * e];
          if (cc + 1 < N) p[1] = acc[4 * j + 2 * e + 1];
        }
      }
    }
}

}  // namespace simtlab
