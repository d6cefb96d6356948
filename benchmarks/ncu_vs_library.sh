#!/usr/bin/env bash
# Nsight Compute on one rung and on the library kernel it is measured against, same problem and
# clocks left alone: the library kernel's name and launch configuration (grid, block, cluster,
# registers, shared memory), then for both the SM clock, speed of light, pipe utilisation, L2 and
# DRAM traffic and the stall reasons per issued instruction.
#   [RUNG_PARAMS="NAME=value ..."] bash benchmarks/ncu_vs_library.sh FAMILY RUNG SIZE [REFERENCE]
# (RUNG_PARAMS: template parameters over the rung's size defaults; NO_REFERENCE=1: the rung only)
set -uo pipefail
family=$1 rung=$2 size=$3 ref=${4:-cuBLAS}
params=(); for p in ${RUNG_PARAMS:-}; do params+=(--param "$p"); done
metrics="sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes.sum,smsp__inst_executed.sum"
metrics+=",lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_red.sum"
metrics+=",regex:^dram__bytes_(read|write)\\.sum$,regex:^lts__t_sectors_srcunit_[a-z]+\\.sum$,regex:^lts__t_sector_hit_rate\\.pct$"
metrics+=",regex:sm__pipe_.*_cycles_active.avg.pct_of_peak_sustained_active"
metrics+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
whos=(rung); [[ -z ${NO_REFERENCE:-} ]] && whos+=(reference)
for who in "${whos[@]}"; do
  if [[ $who == rung ]]; then args=("$rung" "${params[@]}"); filter="regex:^(gemm|conv|stencil|softmax|layernorm)"; else
    args=(--reference "$ref"); filter="regex:nvjet|xmma|cutlass|sgemm|ampere|sm80|sm90"; fi
  echo "== ncu $family ${args[*]} $size"
  ncu --clock-control none --section LaunchStats --section SpeedOfLight --metrics "$metrics" -k "$filter" \
    --launch-count 1 python3 -m simtlab.tools.launch_once "$family" "${args[@]}" --size "$size" 2>&1 |
    grep -vE "^==PROF==|^ +-+ +-+|^$" | grep -vE " 0(\.0+)?$" | sed 's/  \+/ /g'
done
