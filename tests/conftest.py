import os

import pytest


def _gpu_reason() -> str | None:
    from simtlab.device import _probe

    count, why = _probe()
    return None if count else f"no CUDA GPU visible ({why or 'no device'})"


# Markers that select tests by what they exercise (the GPU runs' phases pick with `-m`, never with
# `-k` strings): one per kernel family, given to every test that takes a rung of that family or
# lives in tests/ops/test_<family>.py, and to others by decorator; and the library calls, the
# ladder runner and the tuner.
TOPICS = {"api": "the library calls (simtlab.gemm, gemm_tc, plans, simtlab.torch)",
          "ladder": "the ladder runner (rows, isolation, clocks, out of memory)",
          "tune": "the autotuner", "cluster": "tensor-core rung 6's variants",
          "split": "tensor-core rung 7 (split-K in clusters, small tiles) and the GEMM dispatcher",
          "rows": "the row operators (simtlab.softmax, log_softmax, layer_norm, rms_norm, their torch operators)"}


def pytest_configure(config):
    from simtlab.catalog import FAMILIES

    for name in FAMILIES:
        config.addinivalue_line("markers", f"{name}: exercises the {name} family")
    for name, what in TOPICS.items():
        config.addinivalue_line("markers", f"{name}: exercises {what}")


def _family_markers(item) -> set[str]:
    from simtlab.catalog import FAMILIES
    from simtlab.family import Rung

    values = getattr(getattr(item, "callspec", None), "params", {}).values()
    # (a rung, or a (rung, what it computes) pair)
    rungs = [v if isinstance(v, Rung) else v[0] for v in values
             if isinstance(v, Rung) or (isinstance(v, tuple) and v and isinstance(v[0], Rung))]
    names = {r.family for r in rungs}
    stem = item.path.stem.removeprefix("test_")
    if item.path.parent.name == "ops" and stem in FAMILIES:
        names.add(stem)
    return names


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in _family_markers(item):
            item.add_marker(getattr(pytest.mark, name))
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"gpu test: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """An empty compile cache for tests that count hits and misses."""
    d = tmp_path / "cubin-cache"
    monkeypatch.setenv("SIMTLAB_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Keep the suite's compiles out of the user's cache (shared across tests for speed)."""
    if "SIMTLAB_CACHE_DIR" not in os.environ:
        os.environ["SIMTLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("cubin"))
    yield


def _skip_unless_sm90(what: str) -> None:
    from simtlab.device import device_info

    if device_info().compute_capability != (9, 0):
        pytest.skip(f"{what} (wgmma, TMA) runs on sm_90")


@pytest.fixture
def needs_sm90():
    """`needs_sm90("rung 11")` skips the test unless the GPU is Hopper (sm_90)."""
    return _skip_unless_sm90


def _poisoned_error(run, ws, times: int = 1) -> float:
    import cupy

    for _ in range(times):
        ws.poison()
        run()
    cupy.cuda.get_current_stream().synchronize()
    out, ref = ws.output().astype(cupy.float64), ws.expected()
    assert not bool(cupy.isnan(out).any())
    return float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref))


@pytest.fixture
def poisoned_error():
    """`poisoned_error(run, ws, times)`: `run` on a poisoned C `times` times, then the relative
    Frobenius error of C against the workspace's float64 product (no NaN allowed: beta == 0 poisons
    C with NaN, which must not be read)."""
    return _poisoned_error


def _nonfinite_as_sgemm(product) -> None:
    import torch

    g = torch.Generator(device="cuda").manual_seed(5)
    A, B = torch.randn(256, 320, device="cuda", generator=g), torch.randn(320, 192, device="cuda", generator=g)
    A[3, 7], A[10, 0], A[10, 1], A[77, 300] = float("inf"), float("-inf"), float("inf"), float("nan")
    torch.backends.cuda.matmul.allow_tf32 = False
    want, got = A @ B, product(A, B)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    inf = torch.isinf(want)
    assert torch.equal(torch.sign(got[inf]), torch.sign(want[inf]))
    fin = torch.isfinite(want)
    assert float((got[fin] - want[fin]).abs().max()) <= 1e-4 * float(want[fin].abs().max())


@pytest.fixture
def nonfinite_as_sgemm():
    """`nonfinite_as_sgemm(product)`: `product(A, B)` (fp32 PyTorch tensors on the GPU) with
    infinities and a NaN in A gives infinities and NaNs where cuBLAS SGEMM does, with the same signs,
    and agrees with it on the finite entries."""
    return _nonfinite_as_sgemm
