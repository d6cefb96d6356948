#!/bin/bash
# A short device call (about two minutes) that reruns what run 2026-12-06_h100_511d348_ops_once
# found failing and times what was changed after it: the norms' backward past 8192 columns (partial
# rows capped to half the L2) and transpose of a row. Output under $OUT (or ./out).
set -o pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q -e '.[dev]' 2>&1 | tail -2
export PYTHONUNBUFFERED=1 COLUMNS=200 SIMTLAB_DB=$OUT/results.db
echo "== gpu_last.sh $(date -u +%FT%TZ) commit ${SIMTLAB_COMMIT:-unknown}" | tee "$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/log.txt"
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu tests/test_reduce_api_gpu.py \
  tests/test_rows_api_gpu.py tests/test_attention_gpu.py "tests/test_gpu.py::test_layernorm_rung_matches_float64" \
  > "$OUT/pytest_last.txt" 2>&1; echo "pytest rc $?: $(tail -1 "$OUT/pytest_last.txt")" | tee -a "$OUT/log.txt"
grep -E "^(FAILED|ERROR)" "$OUT/pytest_last.txt" | head -20 | tee -a "$OUT/log.txt"
timeout 40 python3 benchmarks/row_ops.py --only layer_norm,rms_norm --shapes 4096x32768,4096x16384,16384x4096 \
  --dtypes bf16,fp32 --no-host --no-compile --json "$OUT/norms.json" 2>&1 | grep -E "backward|copy:" | tee -a "$OUT/log.txt"
timeout 20 python3 benchmarks/row_ops.py --only transpose --shapes 1x268435456,16384x4096 --dtypes fp32 --no-host \
  --no-compile --json "$OUT/transpose.json" 2>&1 | grep -E "^transpose" | tee -a "$OUT/log.txt"
