"""Rung 12 on a ladder workspace whose A has every third row and B every fifth column near the
smallest normal: the flag and exponents it leaves in its scratch, the error of each tiny row's
products against float64, the rows and columns over 1e-5, and the worst entries' values (a probe
for the scaling path). Everything is compared on the host in NumPy: CuPy's own kernels flush
subnormal fp32 values to zero, which made run 3c3aaa's first probe (and test) see wrong entries
where the products are subnormal.

    python benchmarks/tf32x3_mma_probe.py --size 127x129x65
"""

from __future__ import annotations

import argparse


def main() -> None:
    import cupy
    import numpy as np

    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, runner
    from simtlab.ops import gemm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="127x129x65")
    ap.add_argument("--once", type=int, default=1)
    args = ap.parse_args()
    fam, dev = family("gemm"), device_info()
    rung = fam.rung("tf32x3_mma")
    p = gemm.parse_size(args.size, alpha=1.0, beta=0.0)
    ws = fam.op().workspace(p, seed=5)
    A, B = cupy.asnumpy(ws.A), cupy.asnumpy(ws.B)
    A[::3] = np.ldexp(A[::3], -120)  # (on the host: subnormal values kept)
    B[:, ::5] = np.ldexp(B[:, ::5], -110)
    ws.A.set(A), ws.B.set(B)  # (memory copies: the bits as they are)
    run = runner(build(rung, {**rung.params(dev.arch), "ONCE": args.once}, dev.arch), p, ws, ws.vec_ok(), dev)
    ws.poison()
    run()
    cupy.cuda.get_current_stream().synchronize()
    words = cupy.asnumpy(run.scratch.view(cupy.int32))
    M, N = p.M, p.N
    print("flag", words[0], "row exponents", words[1:1 + min(M, 12)], "column exponents", words[1 + M:1 + M + min(N, 12)])
    out = cupy.asnumpy(ws.output()).astype(np.float64)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    amax = np.abs(A).max(axis=1)
    for r in range(0, min(M, 30), 3):
        row_err = np.abs(out[r, 1::5] - ref[r, 1::5]) / np.abs(ref[r, 1::5]).max()
        print("row", r, "exponent", words[1 + r], "row max", float(amax[r]), "max err / row scale",
              float(row_err.max()), "at column", 1 + 5 * int(row_err.argmax()))
    bad = [r for r in range(0, M, 3)
           if float((np.abs(out[r, 1::5] - ref[r, 1::5]) / np.abs(ref[r, 1::5]).max()).max()) > 1e-5]
    print("tiny rows over 1e-5:", bad)
    print("their exponents:", [int(words[1 + r]) for r in bad])
    cols = [c for c in range(1, N, 5) if float(np.abs(out[::3, c] - ref[::3, c]).max()
                                              / np.abs(ref[::3, c]).max()) > 1e-5]
    print("ordinary columns over 1e-5 in tiny rows:", cols[:20])
    big = np.abs(out[::3, 1::5] - ref[::3, 1::5])
    for flat in np.argsort(big.ravel())[-5:]:
        i, j = np.unravel_index(int(flat), big.shape)
        r, c = 3 * i, 1 + 5 * j
        print(f"entry ({r}, {c}): ours {float(out[r, c]):.6e} float64 {float(ref[r, c]):.6e} "
              f"row's largest {float(np.abs(ref[r, 1::5]).max()):.3e}")


if __name__ == "__main__":
    main()
