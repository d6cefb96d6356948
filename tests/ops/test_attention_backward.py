"""Attention's backward without a GPU: sizes, counts and tolerances, the head dims rung 1 takes, the
operator's three launches (built for sm_90 and sm_80, spill-free at two blocks an SM, exactly the
kernels' parameters), what it refuses, and simtlab.torch.attention's gradient traced through the
two operators' fake implementations."""

import pytest

from declared_checks import A100, H100, check_steps, declare
from simtlab.catalog import family
from simtlab.family import IN, OUT, SCRATCH
from simtlab.ops import attention_backward as bwd

FAM = family("attention_backward")


def test_sizes_counts_and_tolerance():
    p = bwd.parse_size("16x4096x128:causal")
    assert isinstance(p, bwd.BackwardProblem) and (p.bh, p.sq, p.sk, p.d, p.causal) == (16, 4096, 4096, 128, True)
    assert p.flops == 10 * 16 * (4096 * 4097 // 2) * 128  # (2.5x the forward's)
    assert p.bytes == 16 * (4 * 2 * 128 * 8192 + 4 * 4096)
    assert bwd.padded(1) == 64 and bwd.padded(64) == 64 and bwd.padded(65) == 128
    assert 0.02 < bwd.tolerance(p) < 0.05 and bwd.tolerance(bwd.parse_size("2x100x64:fp16")) < 0.01
    assert "64, 128" in bwd.unsupported(FAM.rung(1), bwd.parse_size("1x10x96"))
    assert bwd.unsupported(FAM.rung(1), bwd.parse_size("1x10x64")) is None


def test_rung_1_runs_two_blocks_an_sm_spill_free():
    from simtlab.launch import build

    for arch in ("sm_90", "sm_80"):
        for d in bwd.HEAD_DIMS:
            res = build(FAM.rung(1), {"DT": 1, "D": d}, arch).resources(None)
            assert res.spill_bytes == 0 and res.registers <= 128, (arch, d, res.registers)
    assert 2 * bwd.mma_shared(128) <= H100.smem_per_sm - 2 * 1024


def test_rung_2_fits_one_block_an_sm_spill_free():
    from simtlab.launch import build

    for d in bwd.HEAD_DIMS:
        for dt in (1, 2):
            for slots in (2, 3):
                res = build(FAM.rung(2), {"DT": dt, "D": d, "SLOTS": slots}, "sm_90").resources(None)
                assert res.spill_bytes == 0 and res.registers <= 255, (d, dt, slots, res.registers)
    assert bwd.wgmma_shared(128, 3) <= H100.smem_per_block_optin
    launch = FAM.rung(2).geometry({"DT": 1, "D": 128, "SLOTS": 3}, bwd.parse_size("3x300x257x128"))
    assert launch.grid == (3, 3, 1) and launch.block == (256, 1, 1)  # 128 keys a block


@pytest.mark.parametrize("device", [H100, A100], ids=["sm_90", "sm_80"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_operator_s_launches_fit_and_pass_the_kernels_parameters(device, dtype):
    op = FAM.operators[0]
    for q, kv, causal in [((2, 16, 4096, 128), (2, 16, 4096, 128), True), ((1, 3, 77, 64), (1, 3, 1000, 64), False)]:
        b, h, sq, d = q
        shapes = (q, kv, kv, q, q, (b, h, sq))
        declared, build_once = declare(op, shapes, dtype, True, {"causal": causal}, device)
        check_steps(declared, build_once, shapes, device)
        prep, walk, grads = declared.steps
        assert (prep.function, walk.function, grads.function) == ("attention_bwd_prep", None, "attention_bwd_dq")
        assert declared.outputs == ((q, dtype), (kv, dtype), (kv, dtype))
        sqp = bwd.padded(sq)
        assert declared.scratch == (((b * h * 2 * sqp,), "float32"), ((b * h * sqp * d,), "float32"))
        assert walk.args[:8] == ((IN, 0), (IN, 1), (IN, 2), (IN, 4), (SCRATCH, 0), (SCRATCH, 1), (OUT, 1), (OUT, 2))
        assert grads.args[:2] == ((SCRATCH, 1), (OUT, 0)) and prep.args[:3] == ((IN, 3), (IN, 4), (IN, 5))
        keys = bwd.WGMMA_BKV if device is H100 else bwd.BKV  # rung 2 on Hopper, rung 1 elsewhere
        assert walk.rung.stage == (2 if device is H100 else 1)
        assert walk.launch.grid[:2] == (-(-kv[2] // keys), b * h) and int(walk.args[-1]) == causal


def test_what_the_operator_cannot_take_is_named():
    op = FAM.operators[0]
    q = (1, 2, 8, 64)
    with pytest.raises(ValueError, match="must have q's shape"):
        op.declare((q, q, q, q, (1, 2, 9, 64), (1, 2, 8)), "bfloat16", {}, H100, True, None)
    with pytest.raises(ValueError, match="log-sum-exp"):
        op.declare((q, q, q, q, q, (1, 2, 9)), "bfloat16", {}, H100, True, None)
    with pytest.raises(ValueError, match="multiples of 16 bytes"):
        op.declare((q,) * 5 + ((1, 2, 8),), "bfloat16", {}, H100, False, None)
    with pytest.raises(ValueError, match="head dim 96"):
        op.declare(((1, 2, 8, 96),) * 5 + ((1, 2, 8),), "bfloat16", {}, H100, True, None)
    assert op.typed == {"lse": "float32"}


def test_the_gradient_traces_through_the_fakes():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    q = torch.empty(2, 4, 100, 64, device="meta", dtype=torch.bfloat16, requires_grad=True)
    k = torch.empty(2, 4, 30, 64, device="meta", dtype=torch.bfloat16, requires_grad=True)
    v = torch.empty(2, 4, 30, 64, device="meta", dtype=torch.bfloat16, requires_grad=True)
    out = st.attention(q, k, v, True)
    assert out.shape == q.shape
    dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape) and dq.dtype == torch.bfloat16


def test_the_log_sum_exp_is_handed_back_and_the_backward_callable():
    torch = pytest.importorskip("torch")

    import simtlab

    q = torch.empty(2, 4, 100, 64, device="meta", dtype=torch.float16, requires_grad=True)
    k = torch.empty(2, 4, 30, 64, device="meta", dtype=torch.float16, requires_grad=True)
    out, lse = simtlab.attention(q, k, k, causal=True, return_lse=True)
    assert lse.shape == (2, 4, 100) and lse.dtype == torch.float32 and out.requires_grad and not lse.requires_grad
    dq, dk, dv = simtlab.attention_backward(out, q, k, k, out, lse, causal=True)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, k.shape)
