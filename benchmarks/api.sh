#!/usr/bin/env bash
# One device call for the library calls (simtlab.gemm_tc, simtlab.gemm, simtlab.torch.matmul): the
# offline install, the GPU tests of the calls and of the tensor-core rungs they run, the table of
# benchmarks/api_bench.py (host cost, time per call beside torch, the compiled MLP step) and, with
# SWEEPS=1, rung 6's tile shapes at the sizes where a default config leaves SMs idle; the top
# rungs' ladders with their "API call" rows (SKIP_LADDERS=1 skips them).
# Everything lands in $OUT (default ./out). SIMTLAB_COMMIT=<hash> records which commit ran.
#   API_TESTS   pytest -k expression (default: the calls, every tensor-core rung test); SKIP_TESTS=1 skips them
#   API_BENCH   arguments for api_bench.py (default: everything)
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export COLUMNS=200 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.whl" PIP_DISABLE_PIP_VERSION_CHECK=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${SIMTLAB_COMMIT:-unknown}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
python3 -m pip install -q -e ".[dev]" 2>&1 | grep -v "^$" | tail -2
if [[ -z ${SKIP_TESTS:-} ]]; then
  echo "== GPU tests: ${API_TESTS:=api or tensor_core or tf32 or sixteen or cluster_rung}"
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_api_gpu.py tests/test_gpu.py -k "$API_TESTS" 2>&1 \
    | tee "$OUT/pytest_api.txt" | tail -8
fi
if [[ -n ${SWEEPS:-} ]]; then
  for size in 2048:bf16:bf16 8192x1024x8192:bf16:bf16 64x512x512x512:bf16:bf16; do
    echo "== rung 6 tile shapes at $size"
    python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size "$size" --param BN=128,256 --param CM=1,2 \
      --param STAGES=4,6 --json "$OUT/sweep_${size%%:*}.json" 2>&1 | tail -16
  done
fi
if [[ -z ${SKIP_LADDERS:-} ]]; then  # the ladders' top rungs beside their "API call" rows
  echo "== simtlab ladder gemm_tc --rung 6"
  simtlab ladder gemm_tc --rung 6 -s 4096:bf16:bf16 -s 8192:bf16:bf16 -s 2048:bf16:bf16 --json-out "$OUT/gemm_tc_top.json" 2>&1 | tail -30
  echo "== simtlab ladder gemm --rung 10"
  simtlab ladder gemm --rung 10 -s 4096 -s 4097x4095x4093 --json-out "$OUT/gemm_top.json" 2>&1 | tail -20
fi
echo "== benchmarks/api_bench.py ${API_BENCH:-}"
SIMTLAB_COMMIT=${SIMTLAB_COMMIT:-unknown} python3 benchmarks/api_bench.py --json "$OUT/api.json" ${API_BENCH:-} 2>&1 \
  | tee "$OUT/api_bench.txt"
