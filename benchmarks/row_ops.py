"""The row operators as a user calls them, beside PyTorch (GPU): simtlab.softmax, log_softmax,
layer_norm and rms_norm - forward, and the backward autograd runs (torch.ops.simtlab.softmax_backward
and norm_backward) - against the same op in PyTorch eager (torch.softmax, F.layer_norm, F.rms_norm;
aten's backwards from the forward's saved statistics, RMSNorm's through autograd) and compiled
(torch.compile of the same op; for the backwards, of its formula, which Inductor fuses), and the
device copy of the bytes the operator must move.

Each call is timed by triton.testing.do_bench (L2 cleared before each repetition, median), the
contenders interleaved over ROUNDS rounds; a ratio is the median of the rounds' ratios. GB/s are
the bytes that must move (the row streams and the per-column vectors, once) over the time. Each
simtlab result is checked against eager PyTorch's (relative Frobenius error).

Then the host cost of a repeated call (64 x 1024 bf16, 400 calls enqueued while the GPU sleeps,
medians of rounds), simtlab beside PyTorch eager, inference (no autograd) and training (through
the simtlab:: operators).

sum, amax (over the rows, and over every element), cumsum, transpose and sort (fp32; the matrix as
one row of keys: keys, pairs beside torch.sort's keys and indices, argsort) take --only
sum,amax,cumsum,transpose,sort.

    python benchmarks/row_ops.py [--json out.json] [--only softmax,log_softmax,layer_norm,rms_norm]
                                 [--shapes 16384x4096,...] [--dtypes bf16,fp32] [--no-compile] [--host-only]
                                 [--cluster-from 4096]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F
import triton

import simtlab
import simtlab.torch  # noqa: F401 (the simtlab:: operators)
from api_bench import host_samples  # (beside this script: the same host-cost measure as the GEMM's)

ROUNDS = 3
SHAPES = ((65536, 1024), (16384, 4096), (65536, 4096), (8192, 8192), (4096, 16384), (4096, 32768))
TYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}
OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
MORE = ("sum", "amax", "cumsum", "transpose", "sort")  # --only ... (fp32 only for the last three)
EPS = 1e-5


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def _error(ours, ref) -> float:
    ours, ref = ours.double(), ref.double()
    return float((ours - ref).norm() / max(float(ref.norm()), 1e-300))


# the compiled formulas of the backwards (what Inductor fuses for the same op's autograd)
def _softmax_bwd(y, dy):
    return y * (dy - (dy * y).sum(-1, keepdim=True))


def _log_softmax_bwd(y, dy):
    return dy - torch.exp(y) * dy.sum(-1, keepdim=True)


def _layer_norm_bwd(x, w, dy):
    xf, g = x.float(), dy.float() * w.float()
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((xf - mean) ** 2).mean(-1, keepdim=True) + EPS)
    xhat = (xf - mean) * rstd
    dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dy.float() * xhat).sum(0).to(w.dtype), dy.float().sum(0).to(w.dtype)


def _rms_norm_bwd(x, w, dy):
    xf, g = x.float(), dy.float() * w.float()
    rstd = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + EPS)
    xhat = xf * rstd
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dy.float() * xhat).sum(0).to(w.dtype)


def cases(op: str, x, w, b, dy, compile_: bool):
    """(name, bytes to move, {contender: call}, check) for op's forward and backward at x."""
    rows, cols = x.shape
    es = x.element_size()
    comp = (lambda f: torch.compile(f, dynamic=True)) if compile_ else None
    out = []
    if op in ("sum", "amax"):  # over the rows, then over every element (a row of rows x cols)
        for label, dim, nout in ((op, -1, rows), (f"{op} (all)", None, 1)):
            calls = {"simtlab": lambda dim=dim: getattr(simtlab, op)(x, dim),
                     "torch": (lambda dim=dim: getattr(torch, op)(x, dim)) if dim is not None else
                     (lambda: getattr(torch, op)(x))}
            if comp:
                compiled = comp(lambda a, dim=dim: getattr(torch, op)(a, dim) if dim is not None else getattr(torch, op)(a))
                calls["torch.compile"] = lambda compiled=compiled: compiled(x)
            out.append((label, es * (rows * cols + nout), calls))
        return out
    if op == "cumsum":  # along the rows: x read, the sums written
        if x.dtype != torch.float32:
            return out
        calls = {"simtlab": lambda: simtlab.cumsum(x, -1), "torch": lambda: torch.cumsum(x, -1)}
        if comp:
            compiled = comp(lambda a: torch.cumsum(a, -1))
            calls["torch.compile"] = lambda: compiled(x)
        out.append(("cumsum", 2 * es * rows * cols, calls))
        return out
    if op == "sort":  # the matrix as one row of keys: keys alone, with 32-bit values, positions
        if x.dtype != torch.float32:
            return out
        k = x.reshape(-1)
        v = torch.arange(k.numel(), device="cuda", dtype=torch.int32)
        n = k.numel()
        out.append(("sort keys", 8 * n, {"simtlab": lambda: simtlab.sort(k), "torch": lambda: torch.sort(k, stable=True)}))
        out.append(("sort pairs", 16 * n, {"simtlab": lambda: simtlab.sort(k, v),
                                           "torch": lambda: torch.sort(k, stable=True)}))
        out.append(("argsort", 12 * n, {"simtlab": lambda: simtlab.argsort(k),
                                        "torch": lambda: torch.argsort(k, stable=True)}))
        return out
    if op == "transpose":
        if x.dtype != torch.float32:
            return out
        calls = {"simtlab": lambda: simtlab.transpose(x), "torch": lambda: x.T.contiguous()}
        if comp:
            compiled = comp(lambda a: a.T.contiguous())
            calls["torch.compile"] = lambda: compiled(x)
        out.append(("transpose", 2 * es * rows * cols, calls))
        return out
    if op in ("softmax", "log_softmax"):
        fwd = {"simtlab": lambda: getattr(simtlab, op)(x), "torch": lambda: getattr(torch, op)(x, -1)}
        if comp:
            compiled = comp(lambda a: getattr(torch, op)(a, -1))
            fwd["torch.compile"] = lambda: compiled(x)
        out.append((f"{op}", 2 * es * rows * cols, fwd))
        y = getattr(torch, op)(x, -1)
        log = op == "log_softmax"
        aten = torch._log_softmax_backward_data if log else torch._softmax_backward_data
        bwd = {"simtlab": lambda: torch.ops.simtlab.softmax_backward(y, dy, -1, log),
               "torch": lambda: aten(dy, y, -1, x.dtype)}
        if comp:
            compiled_b = comp(_log_softmax_bwd if log else _softmax_bwd)
            bwd["torch.compile"] = lambda: compiled_b(y, dy)
        out.append((f"{op} backward", 3 * es * rows * cols, bwd))
        return out
    shape = (cols,)
    if op == "layer_norm":
        fwd = {"simtlab": lambda: simtlab.layer_norm(x, w, b, EPS), "torch": lambda: F.layer_norm(x, shape, w, b, EPS)}
        if comp:
            compiled = comp(lambda a, c, d: F.layer_norm(a, shape, c, d, EPS))
            fwd["torch.compile"] = lambda: compiled(x, w, b)
        out.append(("layer_norm", es * (2 * rows * cols + 2 * cols), fwd))
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, shape, w, b, EPS)
        bwd = {"simtlab": lambda: torch.ops.simtlab.norm_backward(x, w, dy, EPS, False),
               "torch": lambda: torch.ops.aten.native_layer_norm_backward(dy, x, shape, mean, rstd, w, b,
                                                                          [True, True, True])}
        if comp:
            compiled_b = comp(_layer_norm_bwd)
            bwd["torch.compile"] = lambda: compiled_b(x, w, dy)
        out.append(("layer_norm backward", es * (3 * rows * cols + 3 * cols), bwd))
        return out
    fwd = {"simtlab": lambda: simtlab.rms_norm(x, w, EPS), "torch": lambda: F.rms_norm(x, shape, w, EPS)}
    if comp:
        compiled = comp(lambda a, c: F.rms_norm(a, shape, c, EPS))
        fwd["torch.compile"] = lambda: compiled(x, w)
    out.append(("rms_norm", es * (2 * rows * cols + cols), fwd))
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    yg = F.rms_norm(xg, shape, wg, EPS)
    bwd = {"simtlab": lambda: torch.ops.simtlab.norm_backward(x, w, dy, EPS, True),
           "torch": lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)}
    if comp:
        compiled_b = comp(_rms_norm_bwd)
        bwd["torch.compile"] = lambda: compiled_b(x, w, dy)
    out.append(("rms_norm backward", es * (3 * rows * cols + 2 * cols), bwd))
    return out


def _first(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def copy_gbs() -> float:
    """The device copy's rate: 2 GiB copied, read + written."""
    src = torch.empty(2**31, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / _ms(lambda: dst.copy_(src)) / 1e6


def measure(ops, shapes, dtypes, compile_: bool, copy: float) -> list[dict]:
    rows_out = []
    for dname in dtypes:
        dt = TYPES[dname]
        for rows, cols in shapes:
            g = torch.Generator(device="cuda").manual_seed(rows + cols)
            x = ((torch.rand(rows, cols, device="cuda", generator=g) * 4 - 2) + 1).to(dt)
            w = (torch.rand(cols, device="cuda", generator=g) + 0.5).to(dt)
            b = (torch.rand(cols, device="cuda", generator=g) - 0.5).to(dt)
            dy = (torch.rand(rows, cols, device="cuda", generator=g) * 2 - 1).to(dt)
            for op in ops:
                for name, nbytes, calls in cases(op, x, w, b, dy, compile_):
                    ours, theirs = _first(calls["simtlab"]()), _first(calls["torch"]())
                    err = _error(ours, theirs)
                    times = {k: [] for k in calls}
                    ratios = {k: [] for k in calls if k != "simtlab"}
                    for _ in range(ROUNDS):
                        t = {k: _ms(fn) for k, fn in calls.items()}
                        for k in calls:
                            times[k].append(t[k])
                        for k in ratios:
                            ratios[k].append(t[k] / t["simtlab"])
                    med = {k: statistics.median(v) for k, v in times.items()}
                    row = {"op": name, "dtype": dname, "rows": rows, "cols": cols, "bytes": nbytes,
                           "error_vs_torch": err, "ms": med,
                           "gbs": {k: nbytes / v / 1e6 for k, v in med.items()},
                           "speedup": {k: statistics.median(v) for k, v in ratios.items()}}
                    row["pct_copy"] = 100 * row["gbs"]["simtlab"] / copy
                    rows_out.append(row)
                    sp = "  ".join(f"{k} {v:.2f}x" for k, v in row["speedup"].items())
                    print(f"{name:22s} {dname} {rows:6d}x{cols:<6d} simtlab {row['gbs']['simtlab']:7.0f} GB/s "
                          f"({row['pct_copy']:5.1f}% of copy)  vs {sp}  err {err:.1e}", flush=True)
            del x, w, b, dy
            torch.cuda.empty_cache()
    return rows_out


def host_costs(rounds: int = 9, calls: int = 400) -> list[dict]:
    """Microseconds of host time per call, 64 x 1024 bf16, measured as api_bench.py measures the GEMM's."""
    x = torch.randn(64, 1024, device="cuda").to(torch.bfloat16)
    w = torch.ones(1024, device="cuda", dtype=torch.bfloat16)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    variants = {
        "torch.softmax": lambda: torch.softmax(x, -1), "simtlab.softmax": lambda: simtlab.softmax(x),
        "F.layer_norm": lambda: F.layer_norm(x, (1024,), w, None, EPS),
        "simtlab.layer_norm": lambda: simtlab.layer_norm(x, w, None, EPS),
        "F.rms_norm": lambda: F.rms_norm(x, (1024,), w, EPS), "simtlab.rms_norm": lambda: simtlab.rms_norm(x, w, EPS),
        "torch.softmax, autograd on": lambda: torch.softmax(xg, -1),
        "simtlab.softmax, autograd on (simtlab:: operator)": lambda: simtlab.softmax(xg),
        "F.rms_norm, autograd on": lambda: F.rms_norm(xg, (1024,), wg, EPS),
        "simtlab.rms_norm, autograd on (simtlab:: operator)": lambda: simtlab.rms_norm(xg, wg, EPS),
    }
    samples = host_samples(variants, rounds, calls)
    out = [{"call": k, "us": statistics.median(v)} for k, v in samples.items()]
    for r in out:
        print(f"host  {r['call']:55s} {r['us']:6.1f} us", flush=True)
    return out


def summary(rows: list[dict]) -> list[str]:
    """Per operator and type: the least and the median speedup over each contender, and % of copy."""
    lines = []
    keys = sorted({(r["op"], r["dtype"]) for r in rows})
    for op, dt in keys:
        sel = [r for r in rows if (r["op"], r["dtype"]) == (op, dt)]
        parts = []
        for k in sel[0]["speedup"]:
            v = [r["speedup"][k] for r in sel]
            parts.append(f"vs {k} min {min(v):.2f}x median {statistics.median(v):.2f}x")
        pc = [r["pct_copy"] for r in sel]
        lines.append(f"{op:22s} {dt}: {'; '.join(parts)}; {min(pc):.0f}-{max(pc):.0f}% of the copy")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--only", default=",".join(OPS))
    ap.add_argument("--shapes", default=",".join(f"{r}x{c}" for r, c in SHAPES))
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--host-only", action="store_true")
    ap.add_argument("--no-host", action="store_true")
    ap.add_argument("--cluster-from", type=int, help="softmax's operators take rung 6 from this row length "
                    "(softmax.CLUSTER_FROM, set in this process; default: as shipped)")
    args = ap.parse_args()
    if args.cluster_from is not None:  # (the operators as they would run with the rule set: for choosing it)
        from simtlab.ops import softmax as softmax_ops

        softmax_ops.CLUSTER_FROM = args.cluster_from
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cluster_from": args.cluster_from}
    if not args.no_host:
        result["host"] = host_costs()
    if not args.host_only:
        copy = copy_gbs()
        print(f"device copy: {copy:.0f} GB/s", flush=True)
        result["copy_gbs"] = copy
        result["rows"] = measure(args.only.split(","), shapes, args.dtypes.split(","), not args.no_compile, copy)
        result["summary"] = summary(result["rows"])
        print("\n".join(result["summary"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
