#!/usr/bin/env bash
# One device call: install from the working tree (offline: wheels the image lacks
# travel in .whl), run the test suite with its GPU tests, then the ladders, and
# write logs and results to $OUT (default ./out). Phases: smoke | ladders | sweep | all.
set -uo pipefail
phase=${1:-all}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SIMTLAB_DB="$OUT/results.db" COLUMNS=200
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.whl" PIP_DISABLE_PIP_VERSION_CHECK=1

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short=12 HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+dirty')"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} 2>&1 | tee "$OUT/env.txt"

# The README's two setup commands.
python3 -m pip install -q -e ".[dev]" 2>&1 | tail -3
if [[ $phase == smoke || $phase == all ]]; then
  python3 -m pytest -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest.txt" | tail -15
fi
if [[ $phase == ladders || $phase == smoke || $phase == all ]]; then
  simtlab device | tee "$OUT/device.txt"
  simtlab ladder elementwise 2>&1 | tee "$OUT/ladder_elementwise.txt"
  simtlab ladder gemm --size 2048 2>&1 | tee "$OUT/ladder_gemm_2048.txt"
fi
if [[ $phase == sweep || $phase == all ]]; then
  python3 benchmarks/gemm_sweep.py --size 4096 --size 8192 --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.txt"
fi
if [[ $phase == full || $phase == all ]]; then
  simtlab ladder gemm -s 1024 -s 2048 -s 4096 -s 8192 -s 4096x4096x1024 -s 8192x1024x8192 -s 4097x4095x4093 \
    --plot "$OUT/gemm_ladder.png" --json-out "$OUT/gemm_ladder.json" 2>&1 | tee "$OUT/ladder_gemm_full.txt"
  ncu --clock-control none --metrics \
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum \
    -k regex:gemm_ python3 benchmarks/launch_once.py gemm 5 6 7 8 9 10 --size 2048 2>&1 | tee "$OUT/ncu_bank_conflicts.txt" | tail -60
fi
