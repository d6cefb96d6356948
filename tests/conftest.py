import os

import pytest


def _gpu_reason() -> str | None:
    from simtlab.device import _probe

    count, why = _probe()
    return None if count else f"no CUDA GPU visible ({why or 'no device'})"


def pytest_collection_modifyitems(config, items):
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
