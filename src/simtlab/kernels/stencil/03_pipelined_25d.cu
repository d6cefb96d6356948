// Rung 3 - 2.5D blocking with the loads issued two planes ahead. Rung 2 reads
// each plane once but is slower than rung 1: every step of its z march waits
// for that step's loads (one plane and its halo ring) behind a barrier, so a
// block has one plane of loads in flight and its SM too few bytes to cover
// DRAM latency. Here the plane z+2 (own points and ring) is loaded into
// registers while plane z is computed from shared memory, and plane z+1 is
// written into the other half of a double-buffered tile: one barrier per
// plane, two planes of loads in flight. Each thread also owns RY rows, so the
// block's tile is BX x (BY*RY) and the halo ring costs less per point.
template <int BX, int BY, int RY, int ZC>
__global__ void __launch_bounds__(BX * BY, 1536 / (BX * BY))  // 3/4 occupancy: loads in flight
stencil_25d_pipelined(const float* __restrict__ u, float* __restrict__ out, int NX, int NY, int NZ, float c0,
                      float c1) {
  constexpr int TH = BY * RY, RING = 2 * (BX + 2) + 2 * TH;
  static_assert(RING <= BX * BY, "one ring point per thread at most");
  __shared__ float t[2][TH + 2][BX + 2];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BX + tx;
  const int bx = blockIdx.x * BX, by = blockIdx.y * TH, x = bx + tx;
  const int z0 = blockIdx.z * ZC, z1 = min(z0 + ZC, NZ);
  const size_t plane = (size_t)NX * NY;
  // This thread's point of the halo ring (tile coordinates, -1..BX and -1..TH), if it has one.
  int rx = 0, ry = 0;
  if (tid < BX + 2) {
    rx = tid - 1, ry = -1;
  } else if (tid < 2 * (BX + 2)) {
    rx = tid - (BX + 2) - 1, ry = TH;
  } else if (tid < 2 * (BX + 2) + TH) {
    rx = -1, ry = tid - 2 * (BX + 2);
  } else {
    rx = BX, ry = tid - 2 * (BX + 2) - TH;
  }
  // Column offsets and in-grid flags, computed once: a load of plane z is then one add and one test.
  const bool has_ring = tid < RING && bx + rx >= 0 && bx + rx < NX && by + ry >= 0 && by + ry < NY;
  const size_t ring_off = has_ring ? (size_t)(by + ry) * NX + (bx + rx) : 0;
  // (own rows r at base + r*BY*NX: one 64-bit offset kept, not RY of them - 40 registers at 3/4 occupancy)
  const size_t own_base = (size_t)(by + ty) * NX + x, row_step = (size_t)BY * NX;
  bool own_in[RY];
#pragma unroll
  for (int r = 0; r < RY; ++r) own_in[r] = x < NX && by + ty + BY * r < NY;
  auto own_off = [&](int r) { return own_base + r * row_step; };
  auto load = [&](bool in, size_t off, int zz) -> float {
    return (in && zz >= 0 && zz < NZ) ? __ldg(u + (size_t)zz * plane + off) : 0.0f;
  };
  float prev[RY], cur[RY], next[RY];
#pragma unroll
  for (int r = 0; r < RY; ++r) {
    prev[r] = load(own_in[r], own_off(r), z0 - 1);
    cur[r] = load(own_in[r], own_off(r), z0);
    next[r] = load(own_in[r], own_off(r), z0 + 1);
    t[0][ty + BY * r + 1][tx + 1] = cur[r];
  }
  float ring_next = load(has_ring, ring_off, z0 + 1);
  if (tid < RING) t[0][ry + 1][rx + 1] = load(has_ring, ring_off, z0);
  __syncthreads();
  for (int z = z0; z < z1; ++z) {
    const int b = (z - z0) & 1;
    float nn[RY];  // plane z+2: consumed one step later, so its latency hides behind a whole step
#pragma unroll
    for (int r = 0; r < RY; ++r) nn[r] = load(own_in[r], own_off(r), z + 2);
    const float ring_nn = load(has_ring, ring_off, z + 2);
#pragma unroll
    for (int r = 0; r < RY; ++r) {
      const int ly = ty + BY * r + 1;
      if (own_in[r]) {
        const float s = t[b][ly][tx] + t[b][ly][tx + 2] + t[b][ly - 1][tx + 1] + t[b][ly + 1][tx + 1] + prev[r] + next[r];
        out[(size_t)z * plane + own_off(r)] = fmaf(c1, s, c0 * cur[r]);
      }
    }
    // Plane z+1 into the other buffer: its last readers (step z-1) passed the barrier that ended their step.
#pragma unroll
    for (int r = 0; r < RY; ++r) t[b ^ 1][ty + BY * r + 1][tx + 1] = next[r];
    if (tid < RING) t[b ^ 1][ry + 1][rx + 1] = ring_next;
    __syncthreads();
#pragma unroll
    for (int r = 0; r < RY; ++r) {
      prev[r] = cur[r];
      cur[r] = next[r];
      next[r] = nn[r];
    }
    ring_next = ring_nn;
  }
}
