#!/usr/bin/env bash
# Where a kernel's time goes, by Nsight Compute: speed of light, memory, warp stalls, scheduler,
# occupancy (text), and the stall samples per SASS instruction (CSV), for one launch of one rung.
#   bash benchmarks/ncu_profile.sh NAME FAMILY RUNG SIZE KERNEL-REGEX [LAUNCHES-SKIPPED]
# Writes ncu_NAME.txt and ncu_NAME_source.csv into $OUT (default ./out). Clocks left alone.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
name=$1 family=$2 rung=$3 size=$4 kernel=$5 skip=${6:-0}
launch=(python3 -m simtlab.tools.launch_once "$family" "$rung" --size "$size")
pick=(--clock-control none -k "regex:$kernel" --launch-skip "$skip" --launch-count 1)
echo "-- ncu $name: $family $rung --size $size, kernel $kernel after $skip"
ncu "${pick[@]}" --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats "${launch[@]}" > "$OUT/ncu_$name.txt" 2>&1 \
  || tail -5 "$OUT/ncu_$name.txt"
ncu "${pick[@]}" --section SourceCounters --page source --print-source sass --csv "${launch[@]}" \
  > "$OUT/ncu_${name}_source.csv" 2> "$OUT/ncu_${name}_source.err" || tail -3 "$OUT/ncu_${name}_source.err"
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" \
  "$OUT/ncu_$name.txt" | head -12
