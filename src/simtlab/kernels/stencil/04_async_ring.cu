// Rung 4 - planes stream into a ring of shared-memory slots by cp.async,
// P planes ahead. Rung 3 stages plane z+2 through registers: every plane in
// flight costs registers, 40 of them cap the SM at 75% occupancy, and two
// planes ahead is all it can afford (~30 KB in flight per SM, about what HBM
// latency needs with no margin). Copies that go global -> shared without
// registers cost nothing to keep in flight, so here the block issues plane
// z+P+1 while it computes plane z, and waits only for plane z+1: P planes of
// every resident block are in flight. Interior rows go by 16-byte copies
// (the tile's interior starts at a 16-byte column; a chunk is inside or
// outside the grid when NX % 4 == 0), the side halo columns by 4-byte copies,
// points outside the grid are zero-filled by the copy itself. One barrier a
// plane: it both publishes plane z+1 and retires the slot that plane z+P+1
// overwrites (plane z-2, last read in step z-1).
#include "simtlab_async.cuh"

template <int BX, int BY, int RY, int ZC, int P>
__global__ void __launch_bounds__(BX * BY)
stencil_async_ring(const float* __restrict__ u, float* __restrict__ out, int NX, int NY, int NZ, float c0,
                   float c1) {
  constexpr int TH = BY * RY;                // tile rows
  constexpr int ROW = BX + 8;                // floats per shared row: halo at column 3 and BX+4, interior at 4
  constexpr int SLOT = (TH + 2) * ROW;       // one plane with its halo rows
  constexpr int NS = P + 3;                  // planes z-1, z, z+1 and P ahead
  constexpr int CH = BX / 4;                 // 16-byte chunks per interior row
  static_assert(P >= 1, "at least one plane ahead");
  static_assert(BX % 4 == 0, "interior rows are copied in 16-byte chunks");
  static_assert(2 * TH + 2 * CH <= BX * BY, "one halo copy per thread at most");
  extern __shared__ float4 smem4[];
  float* ring = reinterpret_cast<float*>(smem4);

  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BX + tx;
  const int bx = blockIdx.x * BX, by = blockIdx.y * TH;
  const int z0 = blockIdx.z * ZC, z1 = min(z0 + ZC, NZ);
  const size_t plane = (size_t)NX * NY;
  const bool vec = (NX % 4 == 0) && (reinterpret_cast<size_t>(u) % 16 == 0);

  // This thread's halo copy: a side column point (4 bytes) or a chunk of the top/bottom row.
  int hx = 0, hy = 0, hbytes = 0;
  if (tid < 2 * TH) {
    hx = tid < TH ? -1 : BX, hy = tid % TH, hbytes = 4;
  } else if (tid < 2 * TH + 2 * CH) {
    const int k = tid - 2 * TH;
    hx = 4 * (k % CH), hy = k < CH ? -1 : TH, hbytes = 16;
  }
  const int hgx = bx + hx, hgy = by + hy;
  const bool h_in = hbytes && hgy >= 0 && hgy < NY && hgx >= 0 && hgx < NX;
  const int h_off = h_in ? hgy * NX + hgx : 0;
  const int h_dst = (hy + 1) * ROW + 4 + hx;
  // Offsets inside a plane (32-bit: the host refuses planes of 2^31 points or more), computed
  // once: a copy of plane z is then an add and a test.
  // 16-byte path: KV interior chunks per thread; 4-byte path: the thread's own RY points.
  constexpr int NTH = BX * BY, KV = (TH * CH + NTH - 1) / NTH;
  int v_dst[KV];
  int v_off[KV];
  bool v_in[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = tid + k * NTH, r = i / CH, c = 4 * (i % CH), gx = bx + c, gy = by + r;
    v_dst[k] = i < TH * CH ? (r + 1) * ROW + 4 + c : -1;
    v_in[k] = i < TH * CH && gy < NY && gx < NX;
    v_off[k] = v_in[k] ? gy * NX + gx : 0;
  }
  int own_off[RY];
  bool own_in[RY];
#pragma unroll
  for (int r = 0; r < RY; ++r) {
    const int x = bx + tx, y = by + ty + BY * r;
    own_in[r] = x < NX && y < NY;
    own_off[r] = own_in[r] ? y * NX + x : 0;
  }
  const int own_dst = (ty + 1) * ROW + 4 + tx;  // + r * BY * ROW

  auto fill = [&](int z) {  // plane z (zeros outside the grid) into its ring slot; one commit group
    if (z > z1) {  // past the chunk's last neighbour plane: an empty group keeps the wait counts uniform
      simtlab::cp_async_commit();
      return;
    }
    float* slot = ring + ((z - z0 + 1) % NS) * SLOT;
    const bool zin = z >= 0 && z < NZ;
    const float* src = zin ? u + (size_t)z * plane : u;
    if (vec) {
#pragma unroll
      for (int k = 0; k < KV; ++k)
        if (v_dst[k] >= 0) simtlab::cp_async16(slot + v_dst[k], src + v_off[k], zin && v_in[k]);
      if (hbytes == 16) simtlab::cp_async16(slot + h_dst, src + h_off, zin && h_in);
    } else {
#pragma unroll
      for (int r = 0; r < RY; ++r)
        simtlab::cp_async4(slot + own_dst + r * BY * ROW, src + own_off[r], zin && own_in[r]);
      if (hbytes == 16) {  // the same top/bottom chunk, point by point (it may hang over the grid edge)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const bool ok = zin && hgy >= 0 && hgy < NY && hgx + k < NX;
          simtlab::cp_async4(slot + h_dst + k, ok ? src + h_off + k : u, ok);
        }
      }
    }
    if (hbytes == 4) simtlab::cp_async4(slot + h_dst, src + h_off, zin && h_in);
    simtlab::cp_async_commit();
  };

#pragma unroll 1
  for (int k = -1; k <= P; ++k) fill(z0 + k);  // planes z0-1 .. z0+P: P+2 groups
  float prev[RY], cur[RY];
  simtlab::cp_async_wait<P>();  // planes z0-1 and z0 are in
  __syncthreads();
#pragma unroll
  for (int r = 0; r < RY; ++r) {
    prev[r] = ring[0 * SLOT + own_dst + r * BY * ROW];
    cur[r] = ring[1 * SLOT + own_dst + r * BY * ROW];
  }
  for (int z = z0; z < z1; ++z) {
    simtlab::cp_async_wait<P - 1>();  // plane z+1 is in (planes z+2 .. z+P may still fly)
    __syncthreads();                  // ... for every thread; and step z-1 is done with plane z-2's slot
    fill(z + P + 1);                  // into plane z-2's slot (ring of P+3)
    float* out_z = out + (size_t)z * plane;
    const float* pc = ring + ((z - z0 + 1) % NS) * SLOT + own_dst;
    const float* pn = ring + ((z - z0 + 2) % NS) * SLOT + own_dst;
#pragma unroll
    for (int r = 0; r < RY; ++r) {
      const int at = r * BY * ROW;
      const float next = pn[at];
      const float s = pc[at - 1] + pc[at + 1] + pc[at - ROW] + pc[at + ROW] + prev[r] + next;
      if (own_in[r]) out_z[own_off[r]] = fmaf(c1, s, c0 * cur[r]);
      prev[r] = cur[r];
      cur[r] = next;
    }
  }
  simtlab::cp_async_wait<0>();  // no copy may land in shared memory after the block exits
}
