"""Attention's backward on the GPU: every rung against the float64 gradients of the same rounded inputs
on odd lengths (multiples of no tile), query and key lengths that differ, one query, one key, causal
and not, head dims 64 and 128, bf16 and fp16; large scores; NaN propagated head by head; and
simtlab.attention's gradients (torch autograd through the backward operator) against SDPA's math
backend in float64, on a side stream, captured in a CUDA graph, and in a compiled training step of a
decoder block beside the same block on SDPA."""

import copy

import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.ops import attention_backward as bwd
from simtlab.verify import compare

from test_gpu import _run_rung

pytestmark = [pytest.mark.gpu, pytest.mark.attention_backward]

FAM = family("attention_backward")
SHAPES = [(1, 1, 1, 64), (2, 1, 300, 64), (3, 77, 1, 128), (2, 65, 65, 64), (1, 129, 200, 128), (5, 300, 131, 64),
          (2, 1000, 1000, 128)]


def _runs_here(rung) -> bool:
    from simtlab.device import device_info

    return rung.supports(device_info().compute_capability)


@pytest.mark.parametrize("rung", FAM.rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_rung_matches_float64(rung, shape, causal, dtype):
    if not _runs_here(rung):
        pytest.skip(f"{rung.id} needs compute capability {rung.min_cc}")
    p = bwd.BackwardProblem(*shape, dtype, causal)
    ws = _run_rung(FAM, rung, p, seed=sum(shape) + causal, ladder_params=True)
    verdict = compare(ws.output(), ws.expected(), bwd.tolerance(p))
    assert verdict.ok, verdict.reason


@pytest.mark.parametrize("rung", FAM.rungs, ids=lambda r: r.name)
def test_large_scores_and_nan(rung):
    import cupy

    if not _runs_here(rung):
        pytest.skip(f"{rung.id} needs compute capability {rung.min_cc}")
    p = bwd.BackwardProblem(2, 70, 90, 64, "bfloat16", False)

    def big(ws):  # scores near 1e4: near one-hot rows, recomputed from the LSE of the larger scores
        ws.q[...] = bwd.store(bwd.load(ws.q, p.dtype) * 60, p.dtype)
        ws.refresh_forward()

    ws = _run_rung(FAM, rung, p, seed=7, ladder_params=True, edit=big)
    verdict = compare(ws.output(), ws.expected(), bwd.tolerance(p))
    assert verdict.ok, verdict.reason

    def nan(ws):
        ws.k[1, 5, 3] = np.uint16(0x7FC0)
        ws.refresh_forward()

    ws = _run_rung(FAM, rung, p, seed=8, ladder_params=True, edit=nan)
    for grad in (ws.dq, ws.dk, ws.dv):
        values = bwd.load(grad, p.dtype)
        assert bool(cupy.isnan(values[1]).any()) and not bool(cupy.isnan(values[0]).any())


def _grads64(q, k, v, do, causal, scale):
    import torch
    import torch.nn.functional as F

    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale)
    return torch.autograd.grad(out, leaves, do.double())


def _errors(ours, want) -> list[float]:
    """Each gradient's error relative to its norm, or to a tenth of the three's joined norm where it
    is smaller (as the workspace's reference: dQ and dK of a row that sees one key are zero)."""
    joined = sum(float(w.norm()) ** 2 for w in want) ** 0.5
    return [float((a.double() - b).norm()) / max(float(b.norm()), 0.1 * joined, 1e-30) for a, b in zip(ours, want)]


@pytest.mark.api
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 64), (2, 3, 77, 130, 64), (1, 4, 1000, 1000, 128), (4, 2, 1, 513, 128),
                                   (2, 2, 300, 200, 64)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_operator_s_gradients_match_sdpa_in_float64(shape, causal, dtype):
    torch = pytest.importorskip("torch")

    import simtlab

    b, h, sq, sk, d = shape
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(sum(shape) + causal)
    q, k, v = ((torch.rand(b, h, n, d, device="cuda", generator=gen) * 4 - 2).to(tdtype).requires_grad_()
               for n in (sq, sk, sk))
    do = (torch.rand(b, h, sq, d, device="cuda", generator=gen) * 4 - 2).to(tdtype)
    tol = bwd.tolerance(bwd.BackwardProblem(b * h, sq, sk, d, dtype, causal))
    for scale in (None, 0.05):
        out = simtlab.attention(q, k, v, causal=causal, scale=scale)
        grads = torch.autograd.grad(out, (q, k, v), do)
        want = _grads64(q, k, v, do, causal, scale)
        assert all(g.dtype == tdtype and g.shape == w.shape for g, w in zip(grads, want))
        assert max(_errors(grads, want)) <= tol, (scale, _errors(grads, want), tol)
    # a gradient that is a broadcast view (out.sum()) and q, k, v that are views of one projection
    qkv = (torch.rand(b, sq, 3, h, d, device="cuda", generator=gen) * 4 - 2).to(tdtype).requires_grad_()
    if sq == sk:
        q2, k2, v2 = qkv.permute(2, 0, 3, 1, 4)
        (g,) = torch.autograd.grad(simtlab.attention(q2, k2, v2, causal=causal).sum(), qkv)
        leaf = qkv.detach().double().requires_grad_()
        import torch.nn.functional as F

        (want,) = torch.autograd.grad(F.scaled_dot_product_attention(*leaf.permute(2, 0, 3, 1, 4),
                                                                     is_causal=causal).sum(), leaf)
        assert _errors([g], [want])[0] <= tol


@pytest.mark.api
def test_the_backward_on_a_side_stream_and_in_a_cuda_graph():
    torch = pytest.importorskip("torch")

    import simtlab

    q, k, v = (torch.randn(2, 4, 333, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    tol = bwd.tolerance(bwd.BackwardProblem(8, 333, 333, 128, "bfloat16", True))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # (warm-up on the side stream, as graph capture of autograd wants)
            grads = torch.autograd.grad(simtlab.attention(q, k, v, causal=True), (q, k, v), do)
    torch.cuda.current_stream().wait_stream(side)
    assert max(_errors(grads, _grads64(q, k, v, do, True, None))) <= tol
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = torch.autograd.grad(simtlab.attention(q, k, v, causal=True), (q, k, v), do)
    with torch.no_grad():
        q.copy_(torch.randn_like(q))
        do.copy_(torch.randn_like(do))
    graph.replay()
    torch.cuda.synchronize()
    assert max(_errors(captured, _grads64(q, k, v, do, True, None))) <= tol


def _block(d_model: int, heads: int, attend):
    """A pre-norm decoder block (attention and an MLP) whose attention is `attend(q, k, v)`."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)
            self.qkv, self.proj = torch.nn.Linear(d_model, 3 * d_model), torch.nn.Linear(d_model, d_model)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(),
                                           torch.nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, heads, d_model // heads).permute(2, 0, 3, 1, 4)
            x = x + self.proj(attend(q, k, v).transpose(1, 2).reshape(b, s, d_model))
            return x + self.mlp(self.norm2(x))

    return Block()


@pytest.mark.api
def test_a_compiled_training_step_matches_the_same_block_on_sdpa():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    import simtlab

    torch.manual_seed(0)
    ref = _block(512, 4, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)).cuda().bfloat16()
    ours = _block(512, 4, lambda q, k, v: simtlab.attention(q, k, v, causal=True)).cuda().bfloat16()
    ours.load_state_dict(copy.deepcopy(ref.state_dict()))
    x = torch.randn(4, 300, 512, device="cuda", dtype=torch.bfloat16)
    target = torch.randn_like(x)
    losses = {}
    for name, model, run in (("sdpa", ref, ref), ("simtlab", ours, torch.compile(ours, fullgraph=True))):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        losses[name] = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.mse_loss(run(x).float(), target.float())
            loss.backward()
            opt.step()
            losses[name].append(float(loss.detach()))
    for a, b in zip(losses["simtlab"], losses["sdpa"]):
        assert a == pytest.approx(b, rel=2e-2), losses
    assert losses["simtlab"][-1] < losses["simtlab"][0], losses  # (the steps learn)


@pytest.mark.api
def test_cupy_arrays_take_the_log_sum_exp_and_the_backward():
    import cupy

    torch = pytest.importorskip("torch")

    import simtlab

    rng = cupy.random.default_rng(5)
    q, k, v, do = ((rng.random((2, 3, n, 64), dtype=cupy.float32) * 4 - 2).astype(cupy.float16)
                   for n in (150, 99, 99, 150))
    out, lse = simtlab.attention(q, k, v, causal=True, return_lse=True)
    assert lse.shape == (2, 3, 150) and lse.dtype == cupy.float32
    grads = simtlab.attention_backward(do, q, k, v, out, lse, causal=True)
    want = _grads64(*(torch.as_tensor(a, device="cuda") for a in (q, k, v, do)), True, None)
    tol = bwd.tolerance(bwd.BackwardProblem(6, 150, 99, 64, "float16", True))
    assert max(_errors([torch.as_tensor(g, device="cuda") for g in grads], want)) <= tol
