"""Launch overhead: a chain of STEPS tiny kernels launched one by one from Python, the same chain
captured once into a CUDA graph and replayed, and the chain fused into one kernel. Wall clock per
step (the launch path is what is measured), median of REPS runs; all three must leave the same bits."""

from __future__ import annotations

import numpy as np

from . import function, wall_ms

STEP = ("host/chain_step.cu", "chain_step")
FUSED = ("host/chain_step.cu", "chain_fused")


def launch_overhead(steps: int = 1000, n: int = 1024, reps: int = 5) -> dict:
    """Per-step time of each schedule, in microseconds, and the graph's gain over one-by-one."""
    import cupy

    if steps < 1 or n < 1:
        raise ValueError(f"steps and n must be >= 1, got {steps} and {n}")
    step, fused = function(*STEP), function(*FUSED)
    grid, block = (-(-n // 256), 1, 1), (256, 1, 1)
    x0 = cupy.random.default_rng(3).random(n, dtype=np.float32)
    x = cupy.empty_like(x0)
    stream = cupy.cuda.Stream(non_blocking=True)
    args = (x, np.int32(n))

    def one_by_one():
        with stream:
            x[...] = x0
            for _ in range(steps):
                step(grid, block, args)

    with stream:
        stream.begin_capture()
        for _ in range(steps):
            step(grid, block, args)
        graph = stream.end_capture()

    def replay():
        with stream:
            x[...] = x0
        graph.launch(stream)

    def fused_chain():
        with stream:
            x[...] = x0
            fused(grid, block, (x, np.int32(n), np.int32(steps)))

    results = {}
    outputs = {}
    for name, fn in (("one by one", one_by_one), ("CUDA graph", replay), ("fused kernel", fused_chain)):
        results[name] = wall_ms(fn, reps, stream.synchronize) * 1e3 / steps
        outputs[name] = cupy.asnumpy(x)
    first = outputs["one by one"]
    for name, out in outputs.items():
        if not np.array_equal(first, out):
            raise AssertionError(f"{name} left different values than one-by-one launches")
    ref = np.asarray(cupy.asnumpy(x0), np.float64)
    for _ in range(steps):
        ref = ref * np.float64(np.float32(1.0001)) + 1.0
    err = float(np.linalg.norm(first - ref) / np.linalg.norm(ref))
    if not err < 1e-3:
        raise AssertionError(f"chain result off the float64 recurrence: relative error {err:.2e}")
    return {"steps": steps, "n": n, "us_per_step": results,
            "graph_gain": results["one by one"] / results["CUDA graph"],
            "fused_gain": results["one by one"] / results["fused kernel"], "rel_error": err}
