"""Where a repeated operator call's host time goes (GPU): the public call and each layer under it
timed alone the way api_bench.py times a call (400 calls enqueued while the GPU sleeps, medians of
nine rounds), beside the PyTorch op, then the public call under cProfile (the functions with the
most time of their own).

    python benchmarks/host_profile.py [--shape 64x1024] [--json host_profile.json]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import json
import pstats
import statistics

import torch

import simtlab
from api_bench import host_samples  # (beside this script)
from simtlab.operator import _PLANS, call, named


def layers(x: torch.Tensor, w: torch.Tensor) -> dict:
    """The public calls and what they run, outermost first."""
    simtlab.softmax(x), simtlab.rms_norm(x, w)
    plan = next(p for key, p in _PLANS.items() if key[0] == "softmax")
    packed = plan._variants[True][1][0][0]
    stream = torch._C._cuda_getCurrentRawStream(x.get_device())
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    from cuda.bindings import driver  # (the Cython binding, beside the ctypes one the plans use)

    grid, block, f = packed.grid, packed.block, driver.CUfunction(packed.function.value)
    params, shared, cu_stream = ctypes.addressof(packed.params), packed.shared, driver.CUstream(stream)
    return {
        "torch.softmax": lambda: torch.softmax(x, -1),
        "simtlab.softmax": lambda: simtlab.softmax(x),
        "call(softmax) (under call_along)": lambda: call(named("softmax"), x),
        "plan.run (under call)": lambda: plan.run((x,)),
        "x.new_empty (the output)": lambda: x.new_empty(x.shape),
        "current stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "one packed launch (ctypes cuLaunchKernel)": lambda: packed.launch(stream),
        "the same launch by cuda.bindings": lambda: driver.cuLaunchKernel(f, *grid, *block, shared, cu_stream, params, 0),
        "F.rms_norm": lambda: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6),
        "simtlab.rms_norm": lambda: simtlab.rms_norm(x, w, 1e-6),
        "torch.softmax, autograd on": lambda: torch.softmax(xg, -1),
        "simtlab.softmax, autograd on": lambda: simtlab.softmax(xg),
        "F.rms_norm, autograd on": lambda: torch.nn.functional.rms_norm(xg, (x.shape[-1],), wg, 1e-6),
        "simtlab.rms_norm, autograd on": lambda: simtlab.rms_norm(xg, wg, 1e-6),
    }


def profile(fn, calls: int = 20000, top: int = 25) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="64x1024")
    ap.add_argument("--json")
    args = ap.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    x = torch.randn(*shape, device="cuda").to(torch.bfloat16)
    w = torch.ones(shape[-1], device="cuda", dtype=torch.bfloat16)
    samples = host_samples(layers(x, w), 9, 400)
    rows = [{"call": k, "us": statistics.median(v)} for k, v in samples.items()]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.shape} bf16: host us a call")
    for r in rows:
        print(f"host  {r['call']:45s} {r['us']:6.2f} us", flush=True)
    xg = x.clone().requires_grad_()
    for name, fn in (("simtlab.softmax", lambda: simtlab.softmax(x)),
                     ("simtlab.softmax, autograd on", lambda: simtlab.softmax(xg))):
        print(f"-- cProfile: {name}\n{profile(fn)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "shape": args.shape, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
