import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench_script():
    """A script of benchmarks/ loaded as a module, by file name without .py."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # (registered first: dataclasses look their module up while it executes)
        spec.loader.exec_module(mod)
        return mod

    return load
