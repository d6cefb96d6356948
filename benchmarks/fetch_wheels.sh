#!/usr/bin/env bash
# The H200 machines have no network: benchmarks/gpu_run.py installs with PIP_NO_INDEX from ./.whl.
# Run this once on a machine that reaches PyPI, from the repository root, to fill .whl with what
# the H200 image lacks (its Python is 3.12; everything else simtlab needs is already there).
set -euo pipefail
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl setuptools "nvidia-cuda-cuobjdump>=13.0,<14" "nvidia-cuda-nvdisasm>=13.0,<14" \
  "nvidia-cuda-crt>=13.0,<13.1" "nvidia-cuda-runtime>=13.0,<13.1" optuna alembic sqlalchemy greenlet mako colorlog nvidia-ml-py
ls -la .whl
