"""simtlab.attention forward and backward as a user calls them, beside every backend of PyTorch's
scaled_dot_product_attention this machine offers (flash, cuDNN, memory-efficient; the math backend
only where it fits), at the issue's sizes: bf16, head dim 128, 16 heads, batch x sequence = 16384
tokens, sequences 512-16384, causal and not (GPU).

Forward: the call itself. Backward: torch.autograd.grad of dO through the output (its forward run
outside the timed call, retain_graph) - what loss.backward() runs for the attention. Each call is
timed by triton.testing.do_bench (L2 cleared before each repetition, median); TFLOP/s count the
visible pairs' products (forward 4 s_q s_k d a head, halved by the mask; backward 2.5x that).
simtlab's results are checked against the fastest backend's (relative Frobenius error).

    python benchmarks/attention_table.py [--json out.json] [--seqs 512,4096] [--no-backward]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import simtlab

HEADS, TOKENS, D = 16, 16384, 128
SEQS = (512, 1024, 2048, 4096, 8192, 16384)
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")


def _flops(batch: int, s: int, causal: bool) -> float:
    pairs = s * (s + 1) // 2 if causal else s * s
    return 4.0 * batch * HEADS * pairs * D


def _error(ours, ref) -> float:
    return float((ours.double() - ref.double()).norm() / max(float(ref.double().norm()), 1e-300))


def _sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def _ours(q, k, v, causal):
    return simtlab.attention(q, k, v, causal=causal)


def row(s: int, causal: bool, backward: bool) -> dict:
    batch = TOKENS // s
    gen = torch.Generator(device="cuda").manual_seed(s + causal)
    q, k, v, do = (torch.randn(batch, HEADS, s, D, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(4))
    contenders = {"simtlab": _ours, **{name: _sdpa(b) for name, b in BACKENDS.items()}}
    fwd_flops = _flops(batch, s, causal)
    out = {"seq": s, "batch": batch, "heads": HEADS, "d": D, "causal": causal, "forward": {}, "backward": {}}
    results = {}
    for name, fn in contenders.items():
        try:
            results[name] = fn(q, k, v, causal)
            ms = _ms(lambda: fn(q, k, v, causal))
            out["forward"][name] = {"ms": ms, "tflops": fwd_flops / ms / 1e9}
        except Exception as exc:  # (a backend this machine or shape does not offer)
            out["forward"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"}
    best = min((n for n in BACKENDS if "ms" in out["forward"][n]), key=lambda n: out["forward"][n]["ms"], default=None)
    if best is not None:
        out["forward_error"] = _error(results["simtlab"], results[best])
    if backward:
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        grads = {}
        for name, fn in contenders.items():
            try:
                o = fn(*leaves, causal)
                grads[name] = torch.autograd.grad(o, leaves, do, retain_graph=True)
                ms = _ms(lambda: torch.autograd.grad(o, leaves, do, retain_graph=True))
                out["backward"][name] = {"ms": ms, "tflops": 2.5 * fwd_flops / ms / 1e9}
                del o
            except Exception as exc:
                out["backward"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"}
        best = min((n for n in BACKENDS if "ms" in out["backward"][n]), key=lambda n: out["backward"][n]["ms"],
                   default=None)
        if best is not None and "simtlab" in grads:
            out["backward_error"] = max(_error(a, b) for a, b in zip(grads["simtlab"], grads[best]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--seqs", default=",".join(map(str, SEQS)))
    ap.add_argument("--no-backward", action="store_true")
    args = ap.parse_args()
    name = torch.cuda.get_device_name()
    print(f"# {name}, torch {torch.__version__}, bf16, head dim {D}, {HEADS} heads, {TOKENS} tokens; TFLOP/s "
          "(simtlab's share of the fastest backend)", flush=True)
    rows = []
    for s in (int(x) for x in args.seqs.split(",")):
        for causal in (False, True):
            r = row(s, causal, not args.no_backward)
            rows.append(r)
            for part in ("forward", "backward"):
                if not r[part]:
                    continue
                cells = []
                for n, v in r[part].items():
                    cells.append(f"{n} {v['tflops']:6.1f}" if "tflops" in v else f"{n} -")
                fastest = max((v["tflops"] for n, v in r[part].items() if n != "simtlab" and "tflops" in v), default=0)
                ours = r[part].get("simtlab", {}).get("tflops")
                share = f"{100 * ours / fastest:5.1f}%" if ours and fastest else "-"
                err = r.get(f"{part}_error")
                print(f"{part:8s} s={s:5d} b={r['batch']:2d} {'causal' if causal else 'full  '} | "
                      + " | ".join(cells) + f" | simtlab {share}" + (f" (err {err:.1e})" if err is not None else ""),
                      flush=True)
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
