#!/usr/bin/env bash
# Nsight Compute's speed-of-light, warp-state (stall reasons) and occupancy sections for one rung at
# one size, one launch: the "why" behind a rung that stops short of its roof.
#   bash benchmarks/ncu_sections.sh FAMILY RUNG SIZE KERNEL_REGEX
set -uo pipefail
family=$1 rung=$2 size=$3 kernel=$4
echo "== ncu $family $rung $size"
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis -k "regex:$kernel" --launch-count 1 \
  python3 -m simtlab.tools.launch_once "$family" "$rung" --size "$size" 2>&1 |
  grep -E "Duration|Throughput|Busy|Stall|Warp Cycles|Issued|Eligible|Achieved Occupancy|Theoretical Occupancy|Registers|Pipe|Hit Rate|Bank" |
  grep -v "^==PROF==" | sed 's/  \+/ /g'
