"""GEMM on the shapes models run: simtlab.gemm_tc (bf16 in, bf16 out) beside torch.mm, and
simtlab.gemm (fp32, default precision) beside torch.mm with TF32 off (SGEMM), over a shape set
built here from public model configurations and classic benchmark suites (GPU).

Each call is the public function exactly as a user makes it - nothing prepared outside the timed
call - timed by triton.testing.do_bench (L2 cleared before each repetition, median), simtlab and
torch interleaved over ROUNDS rounds; a shape's share of torch's speed is the median of the
rounds' ratios. Each result is checked against torch's (relative Frobenius error). Each shape's
roofline is max(FLOPs / the measured tensor-core rate, bytes / the measured copy bandwidth) plus
one empty-kernel launch, all measured in this process.

Batched products (attention's scores and values at several sequence lengths, experts side by
side) go through simtlab.gemm_tc on 3-D tensors beside torch.bmm; an MLP block (1024 -> 4096 ->
1024, GELU, bf16, 8 x 512 tokens) trains through simtlab.torch.matmul beside torch.matmul, both
compiled (forward and backward: its transposed products), loss and gradients compared.

    python benchmarks/gemm_shapes.py [--json out.json] [--only bf16,fp32,batched,mlp] [--limit N] [--list]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass

ROUNDS = 3


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    layout: str  # "nn", "nt" (B a transposed view: x @ W.T), "tn" (A a transposed view: dY.T @ X)
    source: str

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def bytes(self, es: int) -> int:
        return es * (self.M * self.K + self.K * self.N + self.M * self.N)

    @property
    def cls(self) -> str:
        """The issue's classes, in this order: long K, a side <= 16, a side 17-128, then by work."""
        if self.K >= 100_000:
            return "K >= 100000"
        small = min(self.M, self.N)
        if small <= 16:
            return "side <= 16"
        if small <= 128:
            return "side 17-128"
        return "large" if self.flops >= 20e9 else "small work"

    @property
    def label(self) -> str:
        return f"{self.M}x{self.N}x{self.K}:{self.layout}"


def _linear(tokens: int, d_in: int, d_out: int, source: str, backward: bool = True) -> list[Shape]:
    """A linear layer y = x W^T (W: d_out x d_in, as nn.Linear stores it) at `tokens` rows: the
    forward (x @ W.T), and for training its two backward products: dX = dY @ W, dW = dY^T @ X."""
    out = [Shape(tokens, d_out, d_in, "nt", f"{source} fwd")]
    if backward:
        out += [Shape(tokens, d_in, d_out, "nn", f"{source} dX"), Shape(d_out, d_in, tokens, "tn", f"{source} dW")]
    return out


# (name, hidden, ffn, kv width (GQA), vocab, gated MLP)
MODELS = [
    ("GPT-2 small", 768, 3072, 768, 50257, False), ("GPT-2 medium", 1024, 4096, 1024, 50257, False),
    ("GPT-2 XL", 1600, 6400, 1600, 50257, False), ("GPT-3 2.7B", 2560, 10240, 2560, 50257, False),
    ("GPT-3 13B", 5120, 20480, 5120, 50257, False),
    ("BERT base", 768, 3072, 768, 30522, False), ("BERT large", 1024, 4096, 1024, 30522, False),
    ("Llama-2 7B", 4096, 11008, 4096, 32000, True), ("Llama-2 13B", 5120, 13824, 5120, 32000, True),
    ("Llama-3 8B", 4096, 14336, 1024, 128256, True), ("Llama-2 70B", 8192, 28672, 1024, 32000, True),
    ("Mistral 7B", 4096, 14336, 1024, 32000, True),
]
DECODE = (1, 4, 16)  # a decode step's rows: batch of sequences
PREFILL = (128, 512, 2048, 8192)


def model_shapes() -> list[Shape]:
    shapes: list[Shape] = []
    for name, d, ffn, kv, vocab, gated in MODELS:
        qkv = d + 2 * kv
        for t in DECODE:  # inference, forward only
            shapes += _linear(t, d, qkv, f"{name} qkv t={t}", False)
            shapes += _linear(t, d, (2 if gated else 1) * ffn, f"{name} up t={t}", False)
            shapes += _linear(t, ffn, d, f"{name} down t={t}", False)
        for t in PREFILL[1:3]:  # training steps (forward and backward) at two sequence budgets
            shapes += _linear(t, d, qkv, f"{name} qkv t={t}")
            shapes += _linear(t, ffn, d, f"{name} down t={t}")
        shapes += _linear(PREFILL[0], d, d, f"{name} out-proj t=128", False)
        shapes += _linear(PREFILL[3], d, vocab, f"{name} lm-head t=8192", False)
    # Mixtral 8x7B experts: 4096 -> 14336 (x2 gated) -> 4096, top-2 of 8: tokens a expert
    for t in (1, 16, 64, 512, 4096):
        shapes += _linear(t, 4096, 2 * 14336, f"Mixtral expert up t={t}", t >= 512)
        shapes += _linear(t, 14336, 4096, f"Mixtral expert down t={t}", False)
    return shapes


def conv_shapes() -> list[Shape]:
    """ResNet-50's convolutions at batch 32 as implicit GEMMs: M = batch x output pixels, N = output
    channels, K = input channels x filter taps."""
    out = []
    for hw, cin, cout, taps in ((112, 3, 64, 49), (56, 64, 64, 9), (56, 64, 256, 1), (56, 256, 64, 1), (28, 128, 128, 9),
                                (28, 512, 128, 1), (14, 256, 256, 9), (14, 1024, 256, 1), (7, 512, 512, 9),
                                (7, 2048, 512, 1)):
        out.append(Shape(32 * hw * hw, cout, cin * taps, "nn", f"ResNet-50 conv {hw}x{hw} {cin}->{cout} k{taps}"))
    return out


def suite_shapes() -> list[Shape]:
    """Classic GEMM benchmark shapes: square powers of two, recurrent-network layers at small
    batches (hidden sizes 1760-7680 against 16-128 columns), speech-model layers with odd sizes,
    and classifier layers with a very long K."""
    out = [Shape(n, n, n, "nn", "square") for n in (256, 512, 1024, 2048, 4096, 8192)]
    for h in (1760, 2048, 2560, 4096, 7680):
        for b in (16, 32, 64, 128):
            out.append(Shape(h, b, h if h != 7680 else 2560, "nn", f"recurrent h={h} batch {b}"))
    for m, n, k in ((5124, 9124, 2560), (35, 8457, 2560), (5124, 700, 2048), (35, 700, 2048), (7680, 5481, 2560),
                    (3072, 7435, 1024), (1760, 7133, 1760), (4096, 7133, 4096), (6144, 48000, 2048), (1024, 700, 512)):
        out.append(Shape(m, n, k, "nn", "speech model"))
    for m, n in ((512, 8), (1024, 8), (512, 16), (1024, 16), (512, 32), (1024, 32)):
        out.append(Shape(m, n, 500_000, "nn", "classifier, long K"))
    out += [Shape(2048, 2048, 131_072, "nn", "long K"), Shape(256, 256, 65_536, "nn", "long K, fp32 error")]
    out += [Shape(128, 1, 1024, "nn", "GEMV"), Shape(4096, 1, 4096, "nn", "GEMV"), Shape(1, 4096, 4096, "nt", "GEMV")]
    return out


def shape_set() -> list[Shape]:
    seen, out = set(), []
    for s in model_shapes() + conv_shapes() + suite_shapes():
        key = (s.M, s.N, s.K, s.layout)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


FP32_SOURCES = ("recurrent", "speech", "classifier", "square", "long K", "GEMV", "GPT-2 small", "BERT base")


def batched_shapes() -> list[tuple[int, int, int, int, str, str]]:
    """(batch, M, N, K, layout, source): attention's Q K^T (K^T a transposed view) and P V per head
    at batch 8 x 16 heads and sequence lengths 128-2048 (head dim 64 and 128), and 8 experts' up
    projections at 16-512 tokens each."""
    out = []
    for seq in (128, 512, 2048):
        for dh in (64, 128):
            out += [(128, seq, seq, dh, "nt", f"attention scores s={seq} d={dh}"),
                    (128, seq, dh, seq, "nn", f"attention values s={seq} d={dh}")]
    out += [(8, t, 14336, 4096, "nt", f"8 experts up t={t}") for t in (16, 128, 512)]
    return out


# --- measuring ------------------------------------------------------------------------------------

def _operands(torch, s: Shape, dtype):
    gen = torch.Generator(device="cuda").manual_seed(s.M * 31 + s.N * 17 + s.K)

    def rand(rows, cols, transposed):
        if transposed:
            return rand(cols, rows, False).T
        return (torch.rand(rows, cols, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1).to(dtype)

    return rand(s.M, s.K, s.layout[0] == "t"), rand(s.K, s.N, s.layout[1] == "t")


def ceilings(torch, triton) -> dict:
    """The measured tensor-core rate (torch.mm bf16 8192^3), copy bandwidth (bytes read + written
    by a 2 GiB device copy) and an empty kernel's time as do_bench sees it."""
    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    t_mm = triton.testing.do_bench(lambda: torch.mm(a, b), warmup=25, rep=200, return_mode="median")
    src = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    t_copy = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    x = torch.empty(1, device="cuda")
    t_empty = triton.testing.do_bench(lambda: x.add_(0), warmup=25, rep=200, return_mode="median")
    del a, b, src, dst
    return {"tc_tflops": 2 * 8192 ** 3 / t_mm / 1e9, "copy_gbs": 2 * (1 << 30) / t_copy / 1e6,
            "launch_us": t_empty * 1e3}


def roofline_us(s: Shape, es: int, ceil: dict) -> float:
    return max(s.flops / (ceil["tc_tflops"] * 1e12), s.bytes(es) / (ceil["copy_gbs"] * 1e9)) * 1e6 + ceil["launch_us"]


def interleaved(ours, theirs, rounds: int) -> dict:
    """Both calls timed round by round (do_bench: L2 cleared before each repetition, median): the
    medians in microseconds and the median of the rounds' ratios (drift between rounds cancels)."""
    import triton

    ratios, t_ours, t_theirs = [], [], []
    for _ in range(rounds):
        a = triton.testing.do_bench(ours, warmup=5, rep=25, return_mode="median")
        b = triton.testing.do_bench(theirs, warmup=5, rep=25, return_mode="median")
        t_ours.append(a), t_theirs.append(b), ratios.append(b / a)
    return {"us": statistics.median(t_ours) * 1e3, "torch_us": statistics.median(t_theirs) * 1e3,
            "share": statistics.median(ratios)}


def measure(shapes, which: str, rounds: int, ceil: dict, log) -> list[dict]:
    import torch

    import simtlab

    rows = []
    for i, s in enumerate(shapes):
        if which == "bf16":
            A, B = _operands(torch, s, torch.bfloat16)
            ours = lambda: simtlab.gemm_tc(A, B, out_dtype="bfloat16")  # noqa: E731
            theirs = lambda: torch.mm(A, B)  # noqa: E731
            es = 2
        else:
            A, B = _operands(torch, s, torch.float32)
            ours = lambda: simtlab.gemm(A, B)  # noqa: E731
            theirs = lambda: torch.mm(A, B)  # noqa: E731
            es = 4
        row = {**asdict(s), "class": s.cls, "which": which}
        try:
            got, ref = ours(), theirs()
            torch.cuda.synchronize()
            row["error_vs_torch"] = float((got.double() - ref.double()).norm() / max(ref.double().norm(), 1e-30))
            if which == "fp32" and s.K >= 4096:  # (accuracy against float64, beside SGEMM's)
                exact = A.double() @ B.double()
                row["error"] = float((got.double() - exact).norm() / exact.norm())
                row["error_sgemm"] = float((ref.double() - exact).norm() / exact.norm())
            row.update(interleaved(ours, theirs, rounds), roofline_us=roofline_us(s, es, ceil))
            row["of_roofline"] = row["roofline_us"] / row["us"]
            if which == "bf16":
                from simtlab.api import gemm_tc_plan

                row["plan"] = gemm_tc_plan(A, B, out_dtype="bfloat16").describe()
        except Exception as exc:  # a shape that fails is reported and the sweep goes on
            row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        rows.append(row)
        log(f"[{which} {i + 1}/{len(shapes)}] {s.label:28} {s.cls:12} " +
            (f"{row['us']:9.1f} us  torch {row['torch_us']:9.1f}  {100 * row['share']:6.1f}%  "
             f"roof {100 * row['of_roofline']:5.1f}%  err {row['error_vs_torch']:.1e}" if "us" in row else row["failed"]))
        del A, B
    return rows


def measure_batched(rounds: int, log) -> list[dict]:
    import torch

    import simtlab

    rows = []
    for b, m, n, k, layout, source in batched_shapes():
        gen = torch.Generator(device="cuda").manual_seed(b + m + n + k)

        def rand(rows_, cols, transposed):
            if transposed:
                return rand(cols, rows_, False).mT
            return (torch.rand(b, rows_, cols, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)

        A, B = rand(m, k, layout[0] == "t"), rand(k, n, layout[1] == "t")
        ours = lambda: simtlab.gemm_tc(A, B, out_dtype="bfloat16")  # noqa: E731
        theirs = lambda: torch.bmm(A, B)  # noqa: E731
        row = {"batch": b, "M": m, "N": n, "K": k, "layout": layout, "source": source, "which": "batched"}
        try:
            got, ref = ours(), theirs()
            row["error_vs_torch"] = float((got.double() - ref.double()).norm() / ref.double().norm())
            row.update(interleaved(ours, theirs, rounds))
        except Exception as exc:
            row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        rows.append(row)
        log(f"[batched] {b}x{m}x{n}x{k}:{layout} " + (f"{row['us']:9.1f} us  torch {row['torch_us']:9.1f}  "
                                                       f"{100 * row['share']:6.1f}%" if "us" in row else row["failed"]))
    return rows


def measure_mlp(rounds: int, tokens: tuple[int, int] = (8, 512), d: int = 1024, hidden: int = 4096) -> dict:
    """An MLP block's training step (x W1^T, GELU, W2^T, MSE loss, backward) through
    simtlab.torch.matmul and through torch.matmul, each compiled: the same weights and batch."""
    import torch
    import triton

    import simtlab.torch as st

    torch.manual_seed(0)
    x = (torch.randn(*tokens, d, device="cuda") / 2).to(torch.bfloat16)
    target = torch.randn(*tokens, d, device="cuda")
    w1 = (torch.randn(hidden, d, device="cuda") / d ** 0.5).to(torch.bfloat16)
    w2 = (torch.randn(d, hidden, device="cuda") / hidden ** 0.5).to(torch.bfloat16)
    out = {}
    for name, mm in (("simtlab", st.matmul), ("torch", torch.matmul)):
        ws = [w1.clone().requires_grad_(), w2.clone().requires_grad_()]

        def loss(x, target, a, b, mm=mm):
            h = torch.nn.functional.gelu(mm(x, a.mT))
            return ((mm(h, b.mT).float() - target) ** 2).mean()

        fwd = torch.compile(loss, fullgraph=True)

        def step(ws=ws, fwd=fwd):
            for w in ws:
                w.grad = None
            fwd(x, target, *ws).backward()

        step()
        value = fwd(x, target, *ws)
        value.backward()
        out[name] = {"loss": float(value), "grads": [w.grad.float() for w in ws], "step": step}
    times = {"simtlab": [], "torch": []}
    for _ in range(rounds):
        for name in times:
            times[name].append(triton.testing.do_bench(out[name]["step"], warmup=10, rep=50, return_mode="median"))
    share = statistics.median(t / s for s, t in zip(times["simtlab"], times["torch"]))
    grad = max(float((g - r).norm() / r.norm()) for g, r in zip(out["simtlab"]["grads"], out["torch"]["grads"]))
    return {"which": "mlp", "shape": f"{tokens[0]}x{tokens[1]}x{d} -> {hidden} -> {d}",
            "simtlab_ms": statistics.median(times["simtlab"]), "torch_ms": statistics.median(times["torch"]),
            "share": share, "loss_rel_diff": abs(out["simtlab"]["loss"] - out["torch"]["loss"]) / abs(out["torch"]["loss"]),
            "max_grad_rel_diff": grad}


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def summary(rows: list[dict], which: str, device: str) -> str:
    ok = [r for r in rows if "share" in r]
    lines = [f"\n{which}: simtlab as % of {'torch.mm' if which == 'bf16' else 'SGEMM (torch.mm, TF32 off)'} on {device}",
             "| class | shapes | geomean | worst | under 90% | geomean of roofline |", "|---|---|---|---|---|---|"]
    classes = ["large", "small work", "side 17-128", "side <= 16", "K >= 100000"]
    for cls in classes + ["all"]:
        part = [r for r in ok if cls == "all" or r["class"] == cls]
        if not part:
            continue
        shares = [r["share"] for r in part]
        lines.append(f"| {'**all**' if cls == 'all' else cls} | {len(part)} | {100 * geomean(shares):.1f}% | "
                     f"{100 * min(shares):.1f}% | {sum(x < 0.9 for x in shares)} | "
                     f"{100 * geomean([r['of_roofline'] for r in part]):.1f}% |")
    failed = [r for r in rows if "failed" in r]
    if failed:
        lines.append(f"failed: {len(failed)}: " + "; ".join(f"{r['M']}x{r['N']}x{r['K']}:{r['layout']} {r['failed']}"
                                                          for r in failed[:5]))
    lines.append("worst ten:")
    for r in sorted(ok, key=lambda r: r["share"])[:10]:
        lines.append(f"  {r['M']}x{r['N']}x{r['K']}:{r['layout']:3} {r['class']:12} {r['us']:9.1f} us, torch "
                     f"{r['torch_us']:9.1f} us: {100 * r['share']:5.1f}%  ({r['source']})")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write every row and the ceilings here")
    ap.add_argument("--only", default="bf16,fp32,batched,mlp", help="any of bf16, fp32, batched, mlp")
    ap.add_argument("--limit", type=int, default=0, help="the first N shapes only (a quick look)")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--list", action="store_true", help="print the shape set and its classes, then stop")
    args = ap.parse_args()
    shapes = shape_set()
    if args.limit:
        shapes = shapes[: args.limit]
    if args.list:
        for s in shapes:
            print(f"{s.label:28} {s.cls:12} {s.source}")
        counts = {c: sum(s.cls == c for s in shapes) for c in dict.fromkeys(s.cls for s in shapes)}
        print(f"{len(shapes)} shapes: {counts}")
        return 0
    import torch
    import triton

    torch.backends.cuda.matmul.allow_tf32 = False  # SGEMM, the fp32 reference
    device = torch.cuda.get_device_name()
    ceil = ceilings(torch, triton)
    print(f"{device}: tensor cores {ceil['tc_tflops']:.0f} TFLOP/s, copy {ceil['copy_gbs']:.0f} GB/s, empty kernel "
          f"{ceil['launch_us']:.2f} us", flush=True)
    report, out = [], {"device": device, "ceilings": ceil, "date": time.strftime("%Y-%m-%d"), "rows": []}
    for which in args.only.split(","):
        if which == "batched":
            rows = measure_batched(args.rounds, lambda t: print(t, flush=True))
            ok = [r for r in rows if "share" in r]
            report.append(f"\nbatched (torch.bmm) on {device}: geomean {100 * geomean([r['share'] for r in ok]):.1f}%, "
                          f"worst {100 * min(r['share'] for r in ok):.1f}%" if ok else "\nbatched: every shape failed")
        elif which == "mlp":
            rows = [measure_mlp(args.rounds)]
            r = rows[0]
            report.append(f"\nMLP block training step {r['shape']} (torch.compile) on {device}: simtlab.torch.matmul "
                          f"{r['simtlab_ms']:.3f} ms, torch {r['torch_ms']:.3f} ms: {100 * r['share']:.1f}% of torch's "
                          f"speed; loss differs by {r['loss_rel_diff']:.1e}, gradients by {r['max_grad_rel_diff']:.1e}")
        else:
            part = shapes if which == "bf16" else [s for s in shapes if s.source.startswith(FP32_SOURCES)]
            rows = measure(part, which, args.rounds, ceil, lambda t: print(t, flush=True))
            report.append(summary(rows, which, device))
        out["rows"] += rows
        if args.json:  # (written after each part: a run cut short keeps what it measured)
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
