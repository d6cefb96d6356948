#!/usr/bin/env bash
# One device call: install from the working tree (offline: the wheels the image
# lacks travel in .whl - fill it first with benchmarks/fetch_wheels.sh), run the
# test suite with its GPU tests, then the ladders.
# Everything lands in $OUT (default ./out): log.txt (all console output),
# results.db, and the JSON/PNG files of the ladders. Phases: smoke | tune | full | all | memory | check (tests + occupancy
# cross-check) | sanitize (compute-sanitizer over every rung) | explain (sanitize, transpose, ncu captures) |
# tunetable (every valid tuned-GEMM configuration) | tc (tensor-core ladder) | conv (conv2d and stencil) |
# softmax | beyond (layernorm, intrinsics, transfers, graphs) | rows (GPU tests, then conv, softmax, beyond) | multi (distributed GEMM, tuning on all GPUs) | rung6 (rung 6's tests, the top of the ladder and the whole ladder, sanitizer) | codegen (rung 10 under several NVRTC option sets) | clocks (top rungs beside the libraries, the ladder's MHz and W columns) | wgmma (a wgmma's time by its N) | waves (sizes with whole rounds of tiles beside the square ones) | out16 (rung 6 writing a 16-bit C: tests, beside cuBLAS) | sanitize6 (compute-sanitizer on rung 6's defaults) | fp32 (the fp32 ladder's top rungs: tests, ladder, sanitizer) | compare (rung 6's variants side by side: their GPU tests, a parameter sweep, a timeline; R6_TESTS, R6_SWEEP, R6_SIZES, R6_TIMELINE) | timeline (rung 6's cycles tile by tile, instrumented build) | interior (fp32 rung 10's unpredicated copies of interior slices, INTERIOR 1 against 0, or INTERIOR_SWEEP: tests, sweeps) | raster (rung 6's tile order, GROUP_M, against L2 and DRAM traffic and the clock: Nsight Compute, sweeps) | lean (rung 6's descriptors in uniform registers, LEAN 1 against 0: tests, sweeps, Nsight Compute, the shipping tables, sanitizer) | wait (rung 6's waiters sleeping, WAIT 1 against 0: tests, sweep, timeline, Nsight Compute beside cuBLAS) | final (the whole test suite and the divergence ladders).
set -uo pipefail
phase=${1:-all}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
[[ -z ${SIMTLAB_NESTED:-} ]] && exec > >(tee -a "$OUT/log.txt") 2>&1  # (a phase run by another logs there already)
export PYTHONUNBUFFERED=1 SIMTLAB_DB="$OUT/results.db" COLUMNS=200
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.whl" PIP_DISABLE_PIP_VERSION_CHECK=1

# The device copy of the tree has no .git: pass SIMTLAB_COMMIT=<hash> to record which commit ran.
echo "== phase $phase, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${SIMTLAB_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null)}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv

# The README's two setup commands (install; test).
[[ -z ${SIMTLAB_NESTED:-} ]] && python3 -m pip install -q -e ".[dev]" 2>&1 | grep -v "^$" | tail -3
if [[ $phase == smoke || $phase == all || $phase == check || $phase == memory ]]; then
  echo "== python3 -m pytest"
  python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -25
fi
echo "== simtlab device"; simtlab device
# Problem lists shared by the phases that time the same ladder.
TC_SIZES=(-s 2048 -s 4096 -s 4096:bf16 -s 6144:bf16 -s 8192 -s 8192:bf16 -s 8192x1024x8192:bf16 -s 4097x4095x4093
          -s 4096:tf32 -s 8192:tf32
          -s 64x512x512x512:bf16)
ROW_SIZES=(-s 1048576x128 -s 131072x1024 -s 32768x4096 -s 4096x32768   # the same 512 MiB at every row length
           -s 1048576x128:bf16 -s 131072x1024:bf16 -s 32768x4096:bf16 -s 4096x32768:bf16)
if [[ $phase == sanitize || $phase == explain ]]; then
  for fam in ${SANITIZE_FAMILIES:-elementwise gemm reduction transpose branch boundary}; do
    echo "== simtlab sanitize $fam"; simtlab sanitize "$fam" --jobs ${SANITIZE_JOBS:-8}
  done
fi
if [[ $phase == explain ]]; then
  echo "== transpose ladder"; simtlab ladder transpose -s 16384 -s 8191x8193 -s 4097x31 --json-out "$OUT/transpose_ladder.json"
  echo "== GPU tests of the transpose and tuner"; python3 -m pytest -q -p no:cacheprovider -m gpu tests/ops tests/test_gpu.py -k transpose 2>&1 | tail -3
  echo "== ncu counters for the access-pattern checks"; bash benchmarks/ncu_capture.sh
fi
if [[ $phase == tunetable ]]; then
  echo "== every valid configuration of gemm/10_tuned at ${TUNE_SIZE:-2048}, in random order, until the time budget"
  simtlab tune gemm --rung tuned --size ${TUNE_SIZE:-2048} --strategy random --budget 5000 --fresh \
    --time-budget ${TUNE_SECONDS:-420} --target-ms 20 --timeout 60 --json > "$OUT/tune_table.json"
  python3 -c "import json; t = json.load(open('$OUT/tune_table.json')); print(len(t), 'evaluations,', sum(e['ms'] is not None for e in t), 'measured')"
fi
if [[ $phase == tc ]]; then
  echo "== GPU tests of the tensor-core rungs (odd shapes, fp16 and bf16, vs float64 and cuBLAS)"
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k tensor_core 2>&1 | tail -4
  echo "== simtlab ladder gemm_tc"
  simtlab ladder gemm_tc "${TC_SIZES[@]}" --json-out "$OUT/gemm_tc_ladder.json"
  echo "== fp32 rungs 9-10 with the brute-force winner as the large-size default (empty store)"
  simtlab ladder gemm -s 2048 -s 4096 -s 8192 --rung 9 --rung 10 --json-out "$OUT/gemm_top_rungs.json"
fi
if [[ $phase == conv ]]; then
  if [[ -z ${SKIP_TESTS:-} ]]; then
    echo "== GPU tests of conv2d and stencil (every radius 1-7, odd sizes, vs float64)"
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "conv2d or stencil" 2>&1 | tail -4
  fi
  echo "== simtlab ladder conv2d"; simtlab ladder conv2d -s 8192:r3 -s 8192:r1 -s 8192:r7 -s 1000x1013:r3 \
    --json-out "$OUT/conv2d_ladder.json"
  echo "== conv2d block shapes"; python3 benchmarks/conv_block_sweep.py --size 8192:r3 --json "$OUT/conv_block_sweep.json"
  echo "== conv2d rung 7 patch rows and tiles per block"; python3 benchmarks/param_sweep.py conv2d tma --size 8192:r3 \
    --param TY=4,8 --param NT=2,4,8,16 --json "$OUT/conv_tma_sweep.json"
  echo "== simtlab ladder stencil"; simtlab ladder stencil -s 512 -s 511x513x257 --json-out "$OUT/stencil_ladder.json"
  echo "== stencil rung 4 tile width, rows and planes ahead"; python3 benchmarks/param_sweep.py stencil async_ring \
    --size 512 --param BX=64,128,256 --param BY=2 --param RY=4,8 --param P=1,2,3 --param ZC=32 --json "$OUT/stencil_sweep.json"
fi
if [[ $phase == rows ]]; then  # issue 8's and 9's tables in one run: conv2d, stencil, softmax, layernorm, host
  echo "== GPU tests: conv2d, stencil, softmax, layernorm, intrinsics, host, tensor cores (pytest.txt)"
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py tests/host \
    -k "conv2d or stencil or softmax or layernorm or intrinsics or host or tensor_core or tf32 or triton" > "$OUT/pytest.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -12
  SIMTLAB_NESTED=1 SKIP_TESTS=1 bash "$0" conv
  SIMTLAB_NESTED=1 SKIP_TESTS=1 bash "$0" softmax
  SIMTLAB_NESTED=1 SKIP_TESTS=1 NO_LN_SWEEP=1 bash "$0" beyond
fi
if [[ $phase == softmax ]]; then
  [[ -z ${SKIP_TESTS:-} ]] && { echo "== GPU tests of softmax"; python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k softmax 2>&1 | tail -4; }
  echo "== simtlab ladder softmax (the same 512 MiB at every row length)"
  simtlab ladder softmax "${ROW_SIZES[@]}" --json-out "$OUT/softmax_ladder.json"
fi
if [[ $phase == beyond ]]; then
  if [[ -z ${SKIP_TESTS:-} ]]; then  # (SKIP_TESTS=1 after a `final` run in the same call)
    echo "== GPU tests: softmax, layernorm, intrinsics, host experiments"
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/host -k "softmax or layernorm or intrinsics or host" 2>&1 | tail -4
  fi
  echo "== simtlab ladder layernorm"; simtlab ladder layernorm "${ROW_SIZES[@]}" --json-out "$OUT/layernorm_ladder.json"
  echo "== intrinsics"; python3 benchmarks/intrinsics_table.py --json "$OUT/intrinsics.json"
  echo "== simtlab transfers"; simtlab transfers
  echo "== simtlab graphs"; simtlab graphs
  [[ -z ${NO_LN_SWEEP:-} ]] && { echo "== layernorm rung 3 launch shapes, bf16"; python3 benchmarks/param_sweep.py \
    layernorm two_sums --size 32768x4096:bf16 --param BLOCK=128,256 --param VPT=4,8 --param EARLY=0,1 \
    --json "$OUT/layernorm_sweep.json"; }
fi
if [[ $phase == newtests ]]; then  # the GPU tests written since the last full GPU run
  python3 -m pytest -q -p no:cacheprovider -rfE tests/test_numerics_gpu.py tests/host tests/test_dist.py \
    tests/test_gpu.py -k "numerics or host or dist or layernorm or softmax or intrinsics or out_of_memory or api_errors or specials or gemm_nan or subnormal or tensor_core_gemm_propagates or reduction_specials or vector_add" \
    > "$OUT/pytest.txt" 2>&1; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -30
fi
if [[ $phase == closing ]]; then  # layernorm, the tensor-core ladder, every GPU test, Kahan
  echo "== simtlab ladder layernorm"; timeout 90 simtlab ladder layernorm "${ROW_SIZES[@]}" \
    --json-out "$OUT/layernorm_ladder.json"
  echo "== simtlab ladder gemm_tc"; timeout 170 simtlab ladder gemm_tc "${TC_SIZES[@]}" --json-out "$OUT/gemm_tc_ladder.json"
  echo "== every GPU test (pytest.txt)"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu > "$OUT/pytest.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -30
  echo "== Kahan-compensated fp32 GEMM vs plain and cuBLAS"; timeout 60 python3 benchmarks/kahan_table.py --json "$OUT/kahan.json"
fi
# Issue 12's tensor-core rung 6: its variant tests and the tensor-core/TF32 tests, the top of the
# ladder beside cuBLAS and Triton, and compute-sanitizer on its defaults.
rung6_tests() {
  echo "== GPU tests of rung 6's variants (pytest_cluster.txt)"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py -k cluster > "$OUT/pytest_cluster.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cluster.txt" | tail -8
  echo "== GPU tests of tensor-core rungs 5-6 and TF32 (pytest.txt)"
  timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py \
    -k "tensor_core and (wgmma_ws or wgmma_cluster) or tf32" > "$OUT/pytest.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -8
}
rung6_ladder() {
  echo "== rungs 5-6 beside cuBLAS and Triton"
  timeout 200 simtlab ladder gemm_tc -s 4096 -s 4096:bf16 -s 8192 -s 8192:bf16 -s 2048 -s 6144:bf16 \
    -s 8192x1024x8192:bf16 -s 4096:tf32 -s 64x512x512x512:bf16 --rung 5 --rung 6 --json-out "$OUT/gemm_tc_top.json"
}
rung6_ncu() {  # PARAM VALUE...: Nsight Compute on rung 6 at 4096:bf16 with PARAM at each value, cuBLAS once
  local param=$1 nr=; shift
  for v in "$@"; do
    echo "== Nsight Compute, rung 6 $param $v at 4096:bf16 (ncu.txt)"
    RUNG_PARAMS="$param=$v" NO_REFERENCE=$nr timeout 120 bash benchmarks/ncu_vs_library.sh gemm_tc 6 4096:bf16 \
      >> "$OUT/ncu.txt" 2>&1
    nr=1
  done
}
rung6_ship() {  # rung 6 as it ships: the top of the ladder, the whole ladder, the sanitizer
  rung6_ladder
  echo "== the whole tensor-core ladder at 4096:bf16"
  timeout 120 simtlab ladder gemm_tc -s 4096:bf16 --json-out "$OUT/gemm_tc_ladder.json"
  rung6_sanitize
}
rung6_sanitize() {
  echo "== compute-sanitizer on rung 6's defaults (sanitize.txt)"
  for size in 300x264x520 2x129x136x72:bf16 127x129x72:tf32; do
    timeout 100 simtlab sanitize gemm_tc --rung wgmma_cluster --size "$size" --jobs 8 >> "$OUT/sanitize.txt" 2>&1
    tail -3 "$OUT/sanitize.txt"
  done
}
if [[ $phase == rung6 ]]; then  # rung 6 as it ships: its tests, the top of the ladder, the whole ladder, the sanitizer
  rung6_tests
  rung6_ship
fi
if [[ $phase == sanitize6 ]]; then  # compute-sanitizer on rung 6's defaults, and on loading the driver bindings alone
  rung6_sanitize
  echo "== compute-sanitizer memcheck on importing cuda.bindings' driver API and calling cuInit, nothing else"
  compute-sanitizer --tool memcheck python3 -c "from cuda.bindings import driver; print(driver.cuInit(0))" 2>&1 | tail -6
fi
if [[ $phase == codegen ]]; then  # issue 11: rung 10 compiled several ways (register assignment), timed beside cuBLAS
  echo "== rung 10 under several NVRTC option sets"
  # (CODEGEN_OPTIONS: a JSON list of option sets instead of the script's own; CODEGEN_SIZES)
  sizes=(); for s in ${CODEGEN_SIZES:-4096 8192}; do sizes+=(--size "$s"); done
  timeout 400 python3 benchmarks/codegen_sweep.py "${sizes[@]}" ${CODEGEN_OPTIONS:+--options "$CODEGEN_OPTIONS"} \
    --json "$OUT/codegen.json"
  [[ -n ${CODEGEN_NCU:-} ]] && { echo "== Nsight Compute, fp32 rung 10 at 4096 (ncu.txt)"
    NO_REFERENCE=1 timeout 120 bash benchmarks/ncu_vs_library.sh gemm tuned 4096 >> "$OUT/ncu.txt" 2>&1
    grep -E "^== |Frequency|inst_executed.sum|stalled_|pipe_fma|Duration|Elapsed" "$OUT/ncu.txt"; }
fi
if [[ $phase == clocks ]]; then  # issues 11-12: the top rungs beside the libraries, with the clock and power each ran at
  echo "== GPU tests of the clock log and the ladder (pytest_clocks.txt)"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py \
    -k "clock or small_ladder or timing or out_of_memory" > "$OUT/pytest_clocks.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_clocks.txt" | tail -5
  echo "== tensor-core rung 6 and the fp32 ladder beside cuBLAS and Triton (MHz and W columns)"
  timeout 180 simtlab ladder gemm_tc -s 4096:fp16 -s 4096:bf16 -s 8192:bf16 --rung 6 --json-out "$OUT/clocks_tc.json"
  timeout 120 simtlab ladder gemm -s 4096 --json-out "$OUT/clocks_fp32.json"  # the whole fp32 ladder
fi
if [[ $phase == waves ]]; then  # issues 11-12: does the last round's gap cost what the plan says? Sizes with whole rounds
  # (2816x6144: 528 tiles of 128x256 = 4 x 132; 8448x8192: 16 x 132) beside 4096² and 8192² (3.88 and 15.5 rounds)
  echo "== rung 6 and rung 10 at sizes of whole rounds of tiles and at the square sizes"
  timeout 200 simtlab ladder gemm_tc --rung 6 -s 4096:bf16 -s 2816x6144x4096:bf16 -s 8192:bf16 -s 8448x8192x8192:bf16 \
    --json-out "$OUT/waves_tc.json"
  timeout 120 simtlab ladder gemm --rung 10 -s 4096 -s 2816x6144x4096 --json-out "$OUT/waves_fp32.json"
fi
if [[ $phase == out16 ]]; then  # issue 12: rung 6 writing C in fp16 / bf16 (mixed precision)
  echo "== GPU tests of 16-bit output and simtlab.gemm_tc (pytest_out16.txt)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py \
    -k "sixteen or gemm_tc_api or (cluster_rung_variants and (CM2-EPI3 or CM1-EPI0))" > "$OUT/pytest_out16.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_out16.txt" | tail -8
  echo "== rung 6 writing bf16 / fp16 C beside cuBLAS and Triton writing the same, and writing fp32"
  timeout 200 simtlab ladder gemm_tc --rung 6 -s 4096:bf16:bf16 -s 4096:bf16 -s 8192:fp16:fp16 -s 8192:fp16 \
    -s 8192x1024x8192:bf16:bf16 -s 64x512x512x512:bf16:bf16 --json-out "$OUT/out16.json"
fi
if [[ $phase == wgmma ]]; then  # issue 12: does a wgmma's time shrink with N in steps of 8 (tiles narrower than 256)?
  echo "== wgmma m64nNk16 rate by N"
  timeout 30 python3 benchmarks/wgmma_rate.py --json "$OUT/wgmma_fp16.json"
  timeout 30 python3 benchmarks/wgmma_rate.py --dtype bf16 --json "$OUT/wgmma_bf16.json"
fi
if [[ $phase == fp32 ]]; then  # issue 11: the fp32 ladder's top rungs (9 multistage, 10 tuned): tests, ladder, sanitizer
  echo "== GPU tests of the fp32 GEMM rungs (pytest_gemm.txt)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py \
    -k "gemm_rung or gemm_top or gemm_api" > "$OUT/pytest_gemm.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gemm.txt" | tail -8
  echo "== fp32 rungs 9-10 beside cuBLAS and Triton"
  timeout 200 simtlab ladder gemm -s 4096 -s 8192 -s 2048 -s 1024 -s 4096x4096x1024 -s 8192x1024x8192 \
    -s 4097x4095x4093 --rung 9 --rung 10 --json-out "$OUT/gemm_top.json"
  echo "== compute-sanitizer on rung 10 (sanitize.txt)"
  timeout 120 simtlab sanitize gemm --rung tuned --size 2000x2100x301 --jobs 8 >> "$OUT/sanitize.txt" 2>&1
  timeout 120 simtlab sanitize gemm --rung tuned --size 1024x768x272 --jobs 8 >> "$OUT/sanitize.txt" 2>&1  # (interior tiles)
  tail -6 "$OUT/sanitize.txt"
  if [[ -n ${FP32_LADDER:-} ]]; then
    echo "== the whole fp32 ladder at 4096^3 (the README's table)"
    timeout 150 simtlab ladder gemm -s 4096 --plot "$OUT/gemm_ladder.png" --json-out "$OUT/gemm_ladder.json"
  fi
fi
if [[ $phase == compare ]]; then  # issue 12: rung 6's variants side by side, in one process
  # R6_TESTS: a pytest -k expression over the variant ids; R6_SWEEP: param_sweep's --param grid;
  # R6_TIMELINE: parameters of the instrumented build over the defaults. The defaults: EPI 2 against 3.
  tests=${R6_TESTS:-EPI2 or EPI3}
  echo "== GPU tests of rung 6's variants: cluster and ($tests) (pytest_cluster.txt)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py -k "cluster and ($tests)" \
    > "$OUT/pytest_cluster.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cluster.txt" | tail -8
  echo "== clusters of 2 and of 2x2 that fit on the device at once (rung 6's defaults, 4096^3)"
  python3 -m simtlab.tools.resident_clusters 2>&1 | tail -3
  sweep=${R6_SWEEP:---param EPI=2,3}
  for size in ${R6_SIZES:-4096 4096:bf16 8192 8192:bf16}; do
    echo "== rung 6 at $size: $sweep"
    timeout 150 python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size "$size" $sweep \
      --json "$OUT/sweep_${size/:/_}.json"
  done
  timeline=${R6_TIMELINE:-}
  echo "== rung 6 timeline, $timeline"
  timeout 100 python3 benchmarks/rung6_timeline.py --size 4096:bf16 $timeline --json "$OUT/timeline.json"
fi
if [[ $phase == interior ]]; then  # issue 11: rung 10 copying interior slices without bounds predicates
  echo "== GPU tests of rung 10's interior copies and the fp32 top rungs (pytest_gemm.txt)"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_gpu.py \
    -k "interior or (gemm_rung and tuned) or gemm_top" > "$OUT/pytest_gemm.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gemm.txt" | tail -8
  sweep=${INTERIOR_SWEEP:---param INTERIOR=0,1}  # (INTERIOR_SWEEP="--param INTERIOR=1 --param XSLICE=0,1": XSLICE)
  for size in ${INTERIOR_SIZES:-4096 8192 2048 1024 4096x4096x1024 8192x1024x8192 4097x4095x4093}; do
    echo "== rung 10 at $size: $sweep"
    timeout 150 python3 benchmarks/param_sweep.py gemm tuned --size "$size" $sweep --json "$OUT/interior_$size.json"
  done
fi
if [[ $phase == raster ]]; then  # issue 12: at 4096^3 rung 6 takes fewer cycles than cuBLAS but runs at a lower
  # clock (the power limit; run 2b1584_wait) and moves more bytes through L2 and DRAM: does the tile order move both?
  rung6_ncu GROUP_M ${RASTER_GROUPS:-4 8 16 32}
  grep -E "^== |Frequency|dram__bytes|lts__t_(bytes|sectors|sector_hit)|Duration|Elapsed Cycles" "$OUT/ncu.txt"
  for size in ${RASTER_SIZES:-4096:bf16 4096 8192:bf16}; do
    echo "== rung 6 at $size: GROUP_M 4, 8, 16, 32"
    timeout 150 python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size "$size" --param GROUP_M=4,8,16,32 \
      --json "$OUT/raster_${size/:/_}.json"
  done
fi
if [[ $phase == wait ]]; then  # issue 12: waiters that sleep (WAIT 1) against waiters that retry (0), then Nsight
  # Compute on both and on cuBLAS (clock, instructions, L2 traffic: the kernel runs at the power limit),
  # and on fp32 rung 10 beside cuBLAS (is its clock the boost clock the NVML samples say?)
  SIMTLAB_NESTED=1 R6_TESTS="WAIT1" R6_SWEEP="--param WAIT=0,1" \
    R6_SIZES="4096 4096:bf16 8192:bf16 2048 64x512x512x512:bf16 4096:tf32" R6_TIMELINE="--param WAIT=1" bash "$0" compare
  rung6_ncu WAIT 0 1
  echo "== Nsight Compute, fp32 rung 10 at 4096 (ncu.txt)"
  timeout 120 bash benchmarks/ncu_vs_library.sh gemm tuned 4096 >> "$OUT/ncu.txt" 2>&1
  grep -E "^== |Frequency|inst_executed.sum|lts__t_bytes|pipe_tensor_cycles|pipe_fma_cycles|stalled_(sleeping|dispatch|wait)|Duration" "$OUT/ncu.txt"
fi
if [[ $phase == lean ]]; then  # issue 12: rung 6's consumers with uniform-register descriptors and a stepped ring
  # (LEAN 1, the default) against slot, phase and descriptors worked out in vector registers each slice (LEAN 0):
  # the tests of every variant, sweeps (A B B A at 4096^3), Nsight Compute on both and cuBLAS (instructions, ALU
  # pipe, clock at the power limit), then the shipping tables and the sanitizer
  rung6_tests
  for size in 4096 4096:bf16 8192:bf16 2048 64x512x512x512:bf16 4096:tf32; do
    values=0,1; [[ $size == 4096* && $size != *tf32 ]] && values=0,1,1,0
    echo "== rung 6 at $size: LEAN $values"
    timeout 150 python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size "$size" --param LEAN=$values \
      --json "$OUT/lean_${size/:/_}.json"
  done
  rung6_ncu LEAN 0 1
  grep -E "^== |Frequency|inst_executed.sum|pipe_(alu|fma|fmaheavy|tensor)_cycles|Duration|Elapsed Cycles" "$OUT/ncu.txt"
  rung6_ship
fi
if [[ $phase == timeline ]]; then  # issue 12: where rung 6's cycles go, tile by tile (an instrumented build)
  echo "== rung 6 timeline"
  timeout 200 python3 benchmarks/rung6_timeline.py ${TIMELINE_SIZES:---size 4096 --size 4096:bf16 --size 8192:bf16 --size 4096x4096x16384:bf16} \
    ${TIMELINE_PARAMS:-} --json "$OUT/timeline${TIMELINE_TAG:-}.json"
  if [[ -z ${TIMELINE_NO_LADDER:-} ]]; then
    echo "== rung 6 beside cuBLAS at the same sizes"
    timeout 100 simtlab ladder gemm_tc -s 4096 -s 4096:bf16 -s 8192:bf16 -s 4096x4096x16384:bf16 --rung 6
  fi
fi
if [[ $phase == kahan ]]; then
  echo "== Kahan-compensated fp32 GEMM vs plain and cuBLAS"; python3 benchmarks/kahan_table.py --json "$OUT/kahan.json"
fi
if [[ $phase == multi ]]; then
  echo "== the distributed GEMM's tests (pytest_dist.txt: PyTorch blocks on the CPU, the tensor-core local GEMM)"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_dist.py > "$OUT/pytest_dist.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_dist.txt" | tail -4
  echo "== distributed GEMM, world size $(nvidia-smi -L | wc -l) (torchrun, NCCL)"
  # (DIST_SIZES, DIST_DTYPES: float32 on the CUDA-core rung, bfloat16 / float16 on the tensor cores; DIST_ALGOS)
  for size in ${DIST_SIZES:-${DIST_SIZE:-8192}}; do for dtype in ${DIST_DTYPES:-float32}; do for algo in ${DIST_ALGOS:-summa rows}; do
    timeout 300 torchrun --standalone --nproc_per_node "$(nvidia-smi -L | wc -l)" benchmarks/dist_gemm.py --size "$size" \
      --algo $algo --dtype $dtype --json "$OUT/dist_gemm.jsonl" 2>&1 | grep -v "^W\|^\*\|OMP_NUM" | tail -3
  done; done; done
  echo "== simtlab tune --gpus all (one measuring process per GPU)"
  simtlab tune gemm --rung tuned --size 1024 --strategy random --budget ${TUNE_BUDGET:-6} --gpus all --fresh 2>&1 | tail -8
fi
if [[ $phase == final ]]; then
  echo "== python3 -m pytest (every CPU and GPU test; full output in pytest.txt)"
  python3 -m pytest -q -p no:cacheprovider -rfE ${PYTEST_ARGS:-} > "$OUT/pytest.txt" 2>&1  # PYTEST_ARGS="-m gpu": GPU tests only
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.txt" | tail -30
  [[ -z ${NO_DIVERGENCE:-} ]] && { echo "== divergence ladders"; simtlab ladder branch --json-out "$OUT/branch_ladder.json"; simtlab ladder boundary; }
fi
if [[ $phase == sanitize || $phase == explain || $phase == tunetable || $phase == tc || $phase == final || $phase == conv || $phase == rows || $phase == softmax || $phase == beyond || $phase == multi || $phase == newtests || $phase == kahan || $phase == closing || $phase == timeline || $phase == rung6 || $phase == compare || $phase == fp32 || $phase == sanitize6 || $phase == codegen || $phase == clocks || $phase == wgmma || $phase == waves || $phase == out16 || $phase == wait || $phase == interior || $phase == raster || $phase == lean ]]; then
  echo "== done $(date -u +%H:%M:%S)"; exit 0
fi
if [[ $phase == check ]]; then
  echo "== occupancy model vs driver"; python3 benchmarks/occupancy_check.py
  echo "== rung 10 with an empty store (size-class defaults)"
  simtlab ladder gemm -s 1024 -s 1536 -s 4097x4095x4093 --rung 9 --rung 10
  echo "== done $(date -u +%H:%M:%S)"; exit 0
fi
echo "== simtlab ladder elementwise"
simtlab ladder elementwise --json-out "$OUT/elementwise_ladder.json"
if [[ $phase == all || $phase == memory ]]; then
  echo "== simtlab ladder reduction"; simtlab ladder reduction -s 2^30 -s 2^30:max -s 2^20 -s 1000003 \
    --json-out "$OUT/reduction_ladder.json"
  echo "== simtlab ladder transpose"; simtlab ladder transpose -s 16384 -s 8191x8193 -s 4097x31 \
    --json-out "$OUT/transpose_ladder.json"
  echo "== divergence"; simtlab ladder branch; simtlab ladder boundary
fi
if [[ $phase == smoke || $phase == tune || $phase == memory ]]; then
  echo "== simtlab ladder gemm --size 2048"; simtlab ladder gemm --size 2048
fi
if [[ $phase == tune ]]; then
  echo "== gemm sweep"
  python3 benchmarks/gemm_sweep.py --size 4096 --size 8192 --json "$OUT/sweep.json"
fi
SIZES=(-s 1024 -s 2048 -s 4096 -s 8192 -s 4096x4096x1024 -s 8192x1024x8192 -s 4097x4095x4093)
if [[ $phase == full || $phase == all ]]; then
  echo "== tuned-rung size classes at every size (stored; rung 10 reads the best per size)"
  python3 benchmarks/gemm_sweep.py --round 4 "${SIZES[@]/-s/--size}" --json "$OUT/sweep_sizes.json"
  echo "== simtlab ladder gemm (issue sizes)"
  simtlab ladder gemm "${SIZES[@]}" --plot "$OUT/gemm_ladder.png" --json-out "$OUT/gemm_ladder.json"
fi
if [[ $phase == memory ]]; then
  echo "== ncu through simtlab profile: global sectors, bank conflicts, branch uniformity (vs simtlab access)"
  for spec in "transpose naive 4096" "transpose shared_tile 4096" "transpose padded_tile 4096" \
              "reduction interleaved_divergent 2^24" "reduction sequential 2^24" "branch even_odd 2^24" \
              "branch branch_free 2^24" "boundary if_else_chain 2^24" "boundary select 2^24"; do
    set -- $spec; echo "-- simtlab profile $1 $2 --size $3"; simtlab profile "$1" "$2" --size "$3" || true
  done
  echo "== simtlab access"; simtlab access
fi
if [[ $phase == full || $phase == all || $phase == memory ]]; then
  echo "== simtlab report"; simtlab report -o "$OUT/report.html"
fi
if [[ ($phase == full || $phase == all) && -z ${NO_NCU:-} ]]; then
  echo "== ncu: shared-memory bank conflicts and shared instructions, gemm rungs 5-10 at 2048^3"
  ncu --clock-control none --metrics \
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum \
    -k regex:gemm_ python3 -m simtlab.tools.launch_once gemm 5 6 7 8 9 10 --size 2048 2>&1 | grep -E "gemm_|conflicts|inst_executed|==PROF==|Error" 
fi
echo "== done $(date -u +%H:%M:%S)"
