"""How wgmma's time scales with its N: m64nNk16 (fp16 or bf16 in, fp32 accumulate) issued back to
back from shared memory by two warpgroups a block, one block per SM, nothing else.

The question behind it: a 4096x4096 output in 128x256 tiles is 512 tiles, 3.88 rounds of the
H200's 132 SMs, so the last round leaves 16 SMs idle (3% of the time). Narrower tiles (N 248,
17 column strips with a last one of 128) even the rounds out only if a wgmma's time shrinks with
N in steps of 8; if it moves in coarser steps the narrow tile costs as much as the wide one.

    python benchmarks/wgmma_rate.py [--n 64 --n 128 ...] [--dtype bf16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table

ITERS = 4096  # each of 4 wgmmas (k16 each: a 64-wide K slice) per iteration
DEFAULT_N = (64, 128, 192, 224, 240, 248, 256)


def kernel_source(n: int, dtype: str) -> str:
    """One kernel, `rate_n{n}`: each warpgroup multiplies its own 64x64 A tile by the block's
    shared 64xN B tile ITER x 4 times into N/2 accumulators, and records the cycles it took."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N must be a multiple of 8 from 8 to 256, got {n}")
    regs = ", ".join(f"%{i}" for i in range(n // 2))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(n // 2))
    a, b = n // 2, n // 2 + 1
    types = {"fp16": "f32.f16.f16", "bf16": "f32.bf16.bf16"}[dtype]
    elem = {"fp16": "__half", "bf16": "__nv_bfloat16"}[dtype]
    conv = {"fp16": "__float2half", "bf16": "__float2bfloat16"}[dtype]
    return f"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef unsigned long long u64;
__device__ __forceinline__ u64 desc_sw128(unsigned addr, unsigned lbo, unsigned sbo) {{
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}}
__device__ __forceinline__ void mma(float (&d)[{n // 2}], u64 a, u64 b) {{
  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"
               "wgmma.mma_async.sync.aligned.m64n{n}k16.{types} {{{regs}}}, %{a}, %{b}, p, 1, 1, 0, 1;\\n}}\\n"
               : {outs} : "l"(a), "l"(b));
}}
extern "C" __global__ void __launch_bounds__(256, 1) rate_n{n}(float* out, long long* cycles, int iters) {{
  // A: two 64x64 K-major tiles (8 KiB each), B: 64 k rows x 256 columns in four 64-column blocks,
  // 128-byte swizzled layout (the values' arrangement does not matter here, only that they vary)
  __shared__ __align__(1024) unsigned char smem[2 * 8192 + 32768];
  {elem}* v = reinterpret_cast<{elem}*>(smem);
  for (int i = threadIdx.x; i < (int)sizeof(smem) / 2; i += blockDim.x) {{
    unsigned h = (unsigned)i * 2654435761u + blockIdx.x;
    v[i] = {conv}(((h >> 16) & 0xFF) / 128.0f - 1.0f);
  }}
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");  // generic writes -> wgmma's reads
  const int wg = threadIdx.x / 128;
  const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned a = base + wg * 8192, b = base + 16384;
  float d[{n // 2}];
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) d[i] = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {{
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma(d, desc_sw128(a + 32 * kk, 16, 1024), desc_sw128(b + 2048 * kk, 8192, 1024));
    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\\n" ::: "memory");
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < {n // 2}; ++i) s += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, action="append")
    ap.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy

    from simtlab.bench import time_gpu
    from simtlab.compile import compile_source
    from simtlab.device import device_info
    from simtlab.tools.clock_log import ClockLog

    dev = device_info()
    blocks = dev.sms
    out = cupy.empty(blocks * 256, cupy.float32)
    cycles = cupy.empty(blocks * 2, cupy.int64)
    rows = []
    with ClockLog() as clocks:
        for n in args.n or DEFAULT_N:
            cubin = compile_source(kernel_source(n, args.dtype), f"wgmma_rate_n{n}.cu", [f"rate_n{n}"], arch="sm_90a")
            fn = cupy.RawModule(path=str(cubin.path)).get_function(cubin.mangled(f"rate_n{n}"))
            res = cubin.resources(f"rate_n{n}")

            def run():
                fn((blocks,), (256,), (out, cycles, cupy.int32(ITERS)))

            t0 = time.time()
            ms = time_gpu(run, target_ms=800, flush=False).median_ms
            c = clocks.summary(t0, time.time())
            per_wgmma = float(cupy.median(cycles.astype(cupy.float64))) / (ITERS * 4)
            fmas = blocks * 2 * ITERS * 4 * 64 * n * 16
            rows.append({"n": n, "registers": res.registers, "ms": ms, "tflops": 2 * fmas / ms / 1e9,
                         "cycles_per_wgmma": per_wgmma, "cycles_per_8_columns": per_wgmma / (n / 8), **c})
    wide = next((r for r in rows if r["n"] == 256), rows[-1])
    t = Table(title=f"wgmma m64nNk16 {args.dtype}, two warpgroups a block, {blocks} blocks, on {dev.name}",
              title_justify="left")
    for col in ("N", "regs", "TFLOP/s", "cycles a wgmma (one warpgroup)", "cycles per 8 columns",
                f"time vs N {wide['n']} (ideal N/{wide['n']})", "SM MHz", "W"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(str(r["n"]), str(r["registers"]), f"{r['tflops']:.1f}", f"{r['cycles_per_wgmma']:.1f}",
                  f"{r['cycles_per_8_columns']:.2f}",
                  f"{r['cycles_per_wgmma'] / wide['cycles_per_wgmma']:.3f} ({r['n'] / wide['n']:.3f})",
                  str(r["sm_mhz"]), str(r["watts"]))
    Console(width=200).print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
