#!/usr/bin/env bash
# Raw Nsight Compute counters for the access-pattern checks (benchmarks/access_vs_ncu.py reads them):
# one CSV per rung, packed into $OUT/ncu.tar.gz (a device call returns at most 8 files). Clocks left
# alone; each rung launched once on fresh inputs.
set -uo pipefail
OUT=${OUT:-$PWD/out}
dir=$(mktemp -d)
METRICS=l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,\
smsp__inst_executed_op_shared_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum,\
smsp__thread_inst_executed_pred_on.sum,smsp__sass_branch_targets.sum,smsp__sass_branch_targets_threads_divergent.sum
capture() {  # family rung size kernel-regex
  echo "-- ncu $1 $2 --size $3"
  ncu --clock-control none --csv --metrics "$METRICS" -k "regex:$4" \
    python3 -m simtlab.tools.launch_once "$1" "$2" --size "$3" > "$dir/$1_$2.csv" 2> "$dir/$1_$2.err" \
    || tail -3 "$dir/$1_$2.err"
}
capture gemm 1 2048 gemm_naive
capture gemm 2 2048 gemm_coalesced
for r in naive shared_tile padded_tile wide_tile; do capture transpose $r 4096 "transpose_$r"; done
capture reduction 1 2^24 reduce_interleaved_divergent
capture reduction 2 2^24 reduce_interleaved_strided
capture reduction 3 2^24 reduce_sequential
capture branch 1 2^24 branch_even_odd
capture branch 2 2^24 branch_free
source() {  # family rung size kernel-regex: per-SASS-instruction counters (threads, conflicts, divergence)
  echo "-- ncu source page $1 $2 --size $3"
  ncu --clock-control none --section SourceCounters --page source --print-source sass --csv -k "regex:$4" \
    python3 -m simtlab.tools.launch_once "$1" "$2" --size "$3" > "$dir/$1_$2_source.csv" 2> "$dir/$1_$2_source.err" \
    || tail -3 "$dir/$1_$2_source.err"
}
source branch 1 2^20 branch_even_odd
for r in shared_tile padded_tile wide_tile; do source transpose $r 2048 "transpose_$r"; done
for r in 1 2 3; do source reduction $r 2^20 "reduce_"; done
ls -la "$dir"
mkdir -p "$OUT" && tar -czf "$OUT/ncu.tar.gz" -C "$dir" .
