#!/usr/bin/env bash
# Nsight Compute on one rung and on the library kernel it is measured against, same problem and
# clocks left alone: the library kernel's name and launch configuration (grid, block, cluster,
# registers, shared memory), then for both the SM clock, speed of light, pipe utilisation, L2 and
# DRAM traffic and the stall reasons per issued instruction.
#   bash benchmarks/ncu_vs_library.sh FAMILY RUNG SIZE [REFERENCE]
set -uo pipefail
family=$1 rung=$2 size=$3 ref=${4:-cuBLAS}
metrics="sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes.sum,smsp__inst_executed.sum"
metrics+=",regex:sm__pipe_.*_cycles_active.avg.pct_of_peak_sustained_active"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
for who in rung reference; do
  if [[ $who == rung ]]; then args=("$rung"); filter="regex:^(gemm|conv|stencil|softmax|layernorm)"; else
    args=(--reference "$ref"); filter="regex:nvjet|xmma|cutlass|sgemm|ampere|sm80|sm90"; fi
  echo "== ncu $family ${args[*]} $size"
  ncu --clock-control none --section LaunchStats --section SpeedOfLight --metrics "$metrics" -k "$filter" \
    --launch-count 1 python3 -m simtlab.tools.launch_once "$family" "${args[@]}" --size "$size" 2>&1 |
    grep -vE "^==PROF==|^ +-+ +-+|^$" | grep -vE " 0(\.0+)?$" | sed 's/  \+/ /g'
done
