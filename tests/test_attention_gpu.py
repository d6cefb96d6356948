"""The attention rungs on the GPU: every rung against a float64 softmax of the same rounded inputs
on odd lengths (not multiples of any tile), query and key lengths that differ, one query, one key,
causal and not, head dims 64 and 128, bf16 and fp16; the log-sum-exp each writes; large score
magnitudes; NaN propagated; and rung 3 beside PyTorch's SDPA."""

import math

import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.ops import attention as att
from simtlab.verify import compare

from test_gpu import _run_rung

pytestmark = [pytest.mark.gpu, pytest.mark.attention]

FAM = family("attention")
# (200 x 300: 600 query blocks, more than an H100's 132 SMs - rung 6's blocks each walk several)
SHAPES = [(1, 1, 1, 64), (2, 1, 300, 64), (3, 77, 1, 128), (2, 65, 65, 64), (1, 129, 200, 128), (5, 300, 131, 64),
          (2, 1000, 1000, 128), (200, 300, 300, 64)]


def _lse64(ws):
    import cupy

    p = ws.p
    out = cupy.empty((p.bh, p.sq), dtype=cupy.float64)
    for h in range(p.bh):
        qh, kh = (att.load(a[h], p.dtype).astype(cupy.float64) for a in (ws.q, ws.k))
        s = (qh @ kh.T) * ws.scale
        if p.causal:
            s[cupy.arange(p.sk)[None, :] > cupy.arange(p.sq)[:, None]] = -cupy.inf
        m = s.max(axis=1)
        out[h] = m + cupy.log(cupy.exp(s - m[:, None]).sum(axis=1))
    return out


@pytest.mark.parametrize("rung", FAM.rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_every_rung_matches_float64(rung, shape, causal, dtype):
    p = att.AttentionProblem(*shape, dtype, causal)
    ws = _run_rung(FAM, rung, p, seed=sum(shape) + causal, ladder_params=True)
    verdict = compare(ws.output(), ws.expected(), att.tolerance(p))
    assert verdict.ok, verdict.reason
    lse = _lse64(ws)
    assert float(abs(ws.lse - lse).max()) <= 1e-3 * max(1.0, float(abs(lse).max()))


@pytest.mark.parametrize("rung", FAM.rungs, ids=lambda r: r.name)
def test_large_scores_and_nan(rung):
    p = att.AttentionProblem(2, 70, 90, 64, "bfloat16", False)

    def big(ws):  # scores near 1e4: the exponentials' shift must be each row's max
        ws.q[...] = att.store(att.load(ws.q, p.dtype) * 60, p.dtype)

    ws = _run_rung(FAM, rung, p, seed=7, ladder_params=True, edit=big)
    assert compare(ws.output(), ws.expected(), att.tolerance(p)).ok

    def nan(ws):
        ws.k[1, 5, 3] = np.uint16(0x7FC0)

    ws = _run_rung(FAM, rung, p, seed=8, ladder_params=True, edit=nan)
    out = ws.output()
    import cupy

    assert bool(cupy.isnan(out[1]).all()) and not bool(cupy.isnan(out[0]).any())


def test_rung_3_beside_sdpa():
    pytest.importorskip("torch")
    import torch.nn.functional as F

    p = att.AttentionProblem(8, 1024, 1024, 128, "bfloat16", True)
    ws = _run_rung(FAM, FAM.rung(3), p, seed=3, ladder_params=True)
    q, k, v = (att.torch_view(a, p.dtype) for a in (ws.q, ws.k, ws.v))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).float()
    ours = att.torch_view(ws.o, p.dtype).float()
    assert float((ours - ref).norm() / ref.norm()) < 2 * att.tolerance(p)
    assert math.isfinite(float(ours.abs().max()))


@pytest.mark.api
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 64), (2, 3, 77, 130, 64), (1, 16, 1000, 1000, 128), (4, 8, 1, 513, 128),
                                   (2, 2, 300, 200, 64)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_operator_matches_sdpa(shape, causal):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    import simtlab

    b, h, sq, sk, d = shape
    g = torch.Generator(device="cuda").manual_seed(sum(shape))
    q, k, v = ((torch.rand(b, h, n, d, device="cuda", generator=g) * 4 - 2).to(torch.bfloat16) for n in (sq, sk, sk))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    tol = att.tolerance(att.AttentionProblem(b * h, sq, sk, d, "bfloat16", causal))
    for scale in (None, 0.05):
        want = ref if scale is None else F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                                         is_causal=causal, scale=scale)
        out = simtlab.attention(q, k, v, causal=causal, scale=scale)
        assert out.dtype == torch.bfloat16 and out.shape == q.shape
        assert float((out.double() - want).norm() / want.norm()) <= tol
    odd = torch.empty(q.numel() + 1, device="cuda", dtype=torch.bfloat16)[1:].view(q.shape)  # 2 bytes off: rung 2
    odd.copy_(q)
    assert float((simtlab.attention(odd, k, v, causal=causal).double() - ref).norm() / ref.norm()) <= tol


@pytest.mark.api
def test_the_operator_on_streams_in_graphs_and_under_compile():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    import simtlab

    q, k, v = (torch.randn(2, 8, 512, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = simtlab.attention(q, k, v, causal=True)
    side.synchronize()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).float()
    assert float((out.float() - ref).norm() / ref.norm()) < 1e-2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = simtlab.attention(q, k, v)
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q, k, v).float()
    assert float((captured.float() - ref).norm() / ref.norm()) < 1e-2
    compiled = torch.compile(lambda a, b, c: simtlab.attention(a, b, c) * 2, fullgraph=True)
    assert float((compiled(q, k, v).float() - 2 * ref).norm() / (2 * ref).norm()) < 1e-2
