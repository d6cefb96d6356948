"""The attention family without a GPU: sizes, counts, tolerances, what each rung refuses, and the
operator's declaration - every launch built for sm_90 and sm_80, within the SM's limits (rung 3's
dynamic shared memory), spill-free, with exactly the kernel's parameters."""

import pytest

from declared_checks import A100, H100, check_steps, declare
from simtlab.catalog import family
from simtlab.family import IN, MAP, OUT
from simtlab.ops import attention as att


def test_sizes_and_counts():
    p = att.parse_size("16x4096x128:causal")
    assert (p.bh, p.sq, p.sk, p.d, p.causal, p.dtype) == (16, 4096, 4096, 128, True, "bfloat16")
    assert p.pairs == 4096 * 4097 // 2 and p.flops == 4 * 16 * p.pairs * 128
    q = att.parse_size("2x100x30x64:fp16")
    assert (q.sq, q.sk, q.dtype) == (100, 30, "float16") and q.label == "2x100x30x64:fp16"
    assert att.AttentionProblem(1, 100, 30, 64, causal=True).pairs == 30 * 31 // 2 + 70 * 30
    with pytest.raises(ValueError, match="unknown tag"):
        att.parse_size("2x64x64:fp8")
    with pytest.raises(ValueError, match="BHxSxD"):
        att.parse_size("2x64")
    assert 0.01 < att.tolerance(p) < 0.05  # (bf16: a few units of 2^-8)


def test_fused_rungs_take_their_head_dims_and_rung_1_any():
    p = att.AttentionProblem(1, 10, 10, 96)
    fam = family("attention")
    assert att.unsupported(fam.rung(1), p) is None
    assert "64, 128" in att.unsupported(fam.rung(2), p) and "64, 128" in att.unsupported(fam.rung(3), p)


@pytest.mark.parametrize("device", [H100, A100], ids=["sm_90", "sm_80"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("vec", [True, False], ids=["aligned", "unaligned"])
def test_the_operator_s_launch_fits_and_passes_the_kernels_parameters(device, dtype, vec):
    op = family("attention").operators[0]
    for shapes, causal in [(((2, 16, 4096, 128),) * 3, True), (((1, 3, 77, 64), (1, 3, 1000, 64), (1, 3, 1000, 64)),
                                                               False)]:
        declared, build_once = declare(op, shapes, dtype, vec, {"causal": causal}, device)
        (step,) = declared.steps
        assert step.rung.stage == (((5 if causal else 6) if device is H100 else 3) if vec else 2)
        check_steps(declared, build_once, shapes, device)
        b, h, sq, d = shapes[0]
        if step.rung.stage in (5, 6):  # Q, K, V as tensor maps: (d, rows, bh), boxes of 64 columns x 128 rows of a head
            assert step.args[:5] == ((MAP, 0), (MAP, 1), (MAP, 2), (OUT, 0), (OUT, 1))
            assert int(step.args[-1]) == (b * h if step.rung.stage == 6 else causal)
            item = 2
            for i, m in enumerate(declared.maps):
                rows = shapes[i][2]
                assert m.slot == (IN, i) and m.dims == (d, rows, b * h) and m.box == (64, 128, 1)
                assert m.strides == (d * item, rows * d * item)
        else:
            assert step.args[:5] == ((IN, 0), (IN, 1), (IN, 2), (OUT, 0), (OUT, 1)) and declared.maps == ()
        assert declared.outputs == ((shapes[0], dtype), ((b, h, sq), "float32"))
        if step.rung.stage == 6:  # (persistent: one block an SM, at most one an item)
            assert step.launch.grid == (min(-(-sq // att.WGMMA_BQ) * b * h, device.sms), 1, 1)
        else:
            rows = {5: att.WGMMA_BQ, 3: att.MMA_BQ, 2: att.FUSED_BQ}[step.rung.stage]
            assert step.launch.grid[:2] == (-(-sq // rows), b * h)


def test_what_the_operator_cannot_take_is_named():
    op = family("attention").operators[0]
    with pytest.raises(ValueError, match="head dim 96"):
        op.declare(((1, 2, 8, 96),) * 3, "bfloat16", {}, H100, True, None)
    with pytest.raises(ValueError, match="one shape"):
        op.declare(((1, 2, 8, 64), (1, 2, 9, 64), (1, 2, 8, 64)), "bfloat16", {}, H100, True, None)
    with pytest.raises(ValueError, match="differ in batch, heads or head dim"):
        op.declare(((1, 2, 8, 64), (1, 3, 9, 64), (1, 3, 9, 64)), "bfloat16", {}, H100, True, None)


def test_the_torch_operator_traces_with_its_fake():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    q = torch.empty(2, 4, 100, 64, device="meta", dtype=torch.bfloat16)
    assert st.attention(q, q, q, True).shape == q.shape
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        st.attention(q.float(), q.float(), q.float())
