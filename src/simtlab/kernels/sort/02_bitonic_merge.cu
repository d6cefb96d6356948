// Rung 2 - bitonic sort with global merge stages: what changed from rung 1: in each merge stage k
// beyond a tile, only the distances j of a tile or more cross tiles and need a pass over global
// memory; once j is below the tile (2 x BLOCK), every remaining step of the stage stays inside a
// tile, so one launch does them all in shared memory. What it should buy: passes over the keys
// fall from log2(n)^2 / 2 to about (log2(n) - log2(tile))^2 / 2 plus one a stage.
#include "01_bitonic_shared.cu"

// phase 0: sort every tile; phase 1: step (k, j) in global memory; phase 2: stage k's steps below
// the tile (j = tile / 2 .. 1) in shared memory, a block a tile.
template <int BLOCK, int FLOAT>
__global__ void __launch_bounds__(BLOCK) sort_bitonic_merge(unsigned* __restrict__ keys, unsigned n2, int phase,
                                                           unsigned k, unsigned j) {
  if (phase == 0) bitonic_tile<BLOCK, FLOAT>(keys, 2, 2 * BLOCK, 1);
  else if (phase == 1) bitonic_global_step<FLOAT>(keys, n2 / 2, k, j);
  else bitonic_tile<BLOCK, FLOAT>(keys, k, k, BLOCK);
}
