"""The GPU runs as data: each phase is a list of steps - GPU tests picked by pytest markers, or a
command - run in order in one device call, their output logged to $OUT/log.txt (and each test
step's whole output to its own file), what they write landing in $OUT.

    python3 benchmarks/gpu_run.py PHASE [PHASE ...] [--out DIR] [--no-install] [--list]

It first installs the working tree offline (the wheels the H200 image lacks travel in .whl:
fill it with benchmarks/fetch_wheels.sh on a machine with a network). Set SIMTLAB_COMMIT=<hash>
to record which commit ran (the device copy of the tree has no .git). Results go to
$OUT/results.db; commit them as text (`simtlab results --db out/results.db --export jsonl -o
...`) beside the run's folder under benchmarks/results/, with a row in its index.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

# Problem lists shared by the phases that time the same ladder.
TC_SIZES = ("2048 4096 4096:bf16 6144:bf16 8192 8192:bf16 8192x1024x8192:bf16 4097x4095x4093 4096:tf32 8192:tf32 "
            "64x512x512x512:bf16")
FP32_SIZES = "1024 2048 4096 8192 4096x4096x1024 8192x1024x8192 4097x4095x4093"
ROW_SIZES = ("1048576x128 131072x1024 32768x4096 4096x32768 "  # the same 512 MiB at every row length
             "1048576x128:bf16 131072x1024:bf16 32768x4096:bf16 4096x32768:bf16")


def sizes(text: str) -> str:
    return " ".join(f"-s {s}" for s in text.split())


def table_step(family: str, rung: str, size: str, name: str, seconds: int = 420) -> "Run":
    """Every valid configuration of a rung's space at one size, in random order, until `seconds`:
    a brute-force table for the tuner's replays ({out}/NAME.json, `simtlab tune --json`)."""
    return Run(f"{family}/{rung} at {size}: every configuration",
               f"simtlab tune {family} --rung {rung} --size {size} --strategy random --budget 5000 --fresh "
               f"--time-budget {seconds} --target-ms 20 --timeout 60 --json > {{out}}/{name}.json", seconds + 140)


def live_step(family: str, rung: str, size: str, budget: int, name: str) -> "Run":
    """`simtlab tune` as a user runs it (the default strategy, batch and measuring time), cold (no
    history, no warm start), at `budget` evaluations; its evaluations to {out}/NAME.json and its
    wall time to the log."""
    return Run(f"simtlab tune {family} --rung {rung} at {size}, {budget} evaluations, live",
               f"s=$(date +%s.%N); simtlab tune {family} --rung {rung} --size {size} --budget {budget} --fresh "
               f"--no-warm-start --json > {{out}}/{name}.json; rc=$?; echo \"wall: $(python3 -c \"import time; "
               f"print(round(time.time() - $s, 1))\") s\"; exit $rc", 420)  # (a model search builds its space first)


@dataclass(frozen=True)
class Tests:
    """GPU tests by marker expression (`-m "gpu and <markers>"`; None: the whole suite, CPU tests too)."""
    markers: str | None
    log: str
    timeout: int = 300
    workers: int = 0  # pytest-xdist processes (correctness only: tests that time anything run alone)


@dataclass(frozen=True)
class Run:
    """A command, `{out}` standing for the output folder. A `gate` that fails skips the rest of its
    phase (a new kernel that hangs or errs would only eat the call's time)."""
    title: str
    command: str
    timeout: int = 300
    gate: bool = False


def mended_tests(timeout: int) -> Run:
    """The GPU tests run 511d348 failed (mended after it), over 8 workers, their failures logged."""
    return Run("the tests run 511d348 failed, mended since", "python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu "
               "tests/test_reduce_api_gpu.py tests/test_rows_api_gpu.py "
               "tests/test_gpu.py::test_layernorm_rung_matches_float64 > {out}/pytest_mended.txt 2>&1; rc=$?; "
               "tail -3 {out}/pytest_mended.txt; grep -e ^FAILED -e ^ERROR {out}/pytest_mended.txt; exit $rc", timeout)


def attention_table(timeout: int, seqs: str = "") -> Run:
    """benchmarks/attention_table.py: simtlab.attention forward and backward beside every SDPA backend."""
    only = f"{seqs} " if seqs else ""
    return Run("attention beside SDPA", f"python3 benchmarks/attention_table.py {only}--json {{out}}/attention_table.json",
               timeout)


# what changed in the operators after run 511d348, timed
OPS_AFTER = (
    Run("norms' backward past 8192 columns", "python3 benchmarks/row_ops.py --only layer_norm,rms_norm --shapes "
        "4096x32768,4096x16384,16384x4096 --dtypes bf16,fp32 --no-host --no-compile --json {out}/norms.json", 60),
    Run("transpose of a row", "python3 benchmarks/row_ops.py --only transpose --shapes 1x268435456,16384x4096 "
        "--dtypes fp32 --no-host --no-compile --json {out}/transpose.json", 30),
    Run("host cost", "python3 benchmarks/row_ops.py --host-only --json {out}/host.json", 90))


# attention_backward rung 2 checked: a gate (two shapes), then every backward GPU test
BWD2_CHECKED = (
    Run("gate: backward rung 2 on two shapes", "python3 -m pytest -q -p no:cacheprovider -x -m gpu "
        "tests/test_attention_backward_gpu.py -k 'wgmma and 2x65x65'", 120, gate=True),
    Tests("attention_backward", "pytest_attention_backward.txt", 150, 8))

# layernorm rung 6: a gate (five shapes), then rungs 5 and 6 at the row operators' lengths
NORMS_GATE = Run("gate: rung 6 on five shapes", "python3 -m pytest -q -p no:cacheprovider -x -m gpu tests/test_gpu.py -k "
                 "'test_layernorm_rung_matches_float64 and cluster_rows and (2x32768 or 333x517 or 7x4096 or 3x20001 "
                 "or 20000x1024)'", 150, gate=True)
NORMS_TESTS = Run("every layernorm rung's GPU tests and the row operators' (gradients, streams, graphs, compile)",
                  "python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu tests/test_rows_api_gpu.py "
                  "tests/test_gpu.py::test_layernorm_rung_matches_float64 tests/test_gpu.py::test_layernorm_reference_agrees "
                  "> {out}/pytest_norms.txt 2>&1; rc=$?; tail -3 {out}/pytest_norms.txt; grep -e ^FAILED -e ^ERROR "
                  "{out}/pytest_norms.txt | head -40; exit $rc", 240)
NORMS_TABLE = Run("layer_norm and rms_norm beside PyTorch", "python3 benchmarks/row_ops.py --only layer_norm,rms_norm "
                  "--no-host --json {out}/norms.json", 300)
NORMS_LADDER = Run("simtlab ladder layernorm (rungs 5, 6)", "simtlab ladder layernorm --rung 5 --rung 6 " + " ".join(
    f"-s {shape}:{kind}" for shape in ("65536x1024", "16384x4096", "8192x8192", "4096x16384", "4096x32768")
    for kind in ("bf16:layer_norm_backward", "rms_norm_backward")) + " --json-out {out}/layernorm_ladder.json", 200)


# attention rung 5 checked and timed: a gate (two shapes), every attention GPU test, the ladder's rungs 4-5,
# the table beside SDPA, the sanitizer
ATTENTION_FWD = (
    Run("gate: rung 5 on two shapes", "python3 -m pytest -q -p no:cacheprovider -x -m gpu tests/test_attention_gpu.py "
        "-k 'warp_specialized and 2x65x65 and bfloat16'", 90, gate=True),
    Tests("attention", "pytest_attention.txt", 150, 8),
    Run("simtlab ladder attention (rungs 4, 5)", "simtlab ladder attention --rung 4 --rung 5 -s 16x4096x128 "
        "-s 4x16384x128:causal -s 32x512x128 --json-out {out}/attention_ladder.json", 80),
    attention_table(120),
    Run("compute-sanitizer on attention rung 5", "simtlab sanitize attention --rung 5 --size 3x77x130x64:causal "
        "--jobs 8", 50))


PHASES: dict[str, tuple[str, list]] = {
    "suite": ("the README's test command, every CPU and GPU test", [Tests(None, "pytest.txt", 560)]),
    "api": ("the library calls: their GPU tests, the ladders' API rows, host cost and time beside torch, the MLP", [
        Tests("api or gemm_tc", "pytest_api.txt", 300),
        Run("rung 6 and its API row", f"simtlab ladder gemm_tc --rung 6 {sizes('4096:bf16:bf16 8192:bf16:bf16 2048:bf16:bf16')} "
            "--json-out {out}/gemm_tc_top.json", 200),
        Run("fp32 rung 10 and its API row", f"simtlab ladder gemm --rung 10 {sizes('4096 4097x4095x4093')} "
            "--json-out {out}/gemm_top.json", 150),
        Run("the calls beside torch", "python3 benchmarks/api_bench.py --json {out}/api.json", 400)]),
    "gemm-table": ("rung 7 (split-K, small tiles) and the dispatcher: its GPU tests, then every candidate timed over "
                   "the shape grid (the table simtlab.gemm_tc dispatches by, put in place for later phases)", [
        Tests("split", "pytest_split.txt", 240),
        Run("the dispatch table", "python3 benchmarks/gemm_dispatch_table.py --out {out}/gemm_tc_sm_90.json "
            "--run \"$SIMTLAB_RUN\" && cp {out}/gemm_tc_sm_90.json src/simtlab/ops/tables/", 330)]),
    "gemm-table-fp32": ("gemm rung 14 (fp32 split-K on the CUDA cores): its GPU tests, then the fp32 table (rung 10 "
                        "and rung 14's tiles and splits over the shape grid), put in place for later phases", [
        Tests("split and gemm and not gemm_tc", "pytest_split_fp32.txt", 200),
        Run("the fp32 dispatch table", "python3 benchmarks/gemm_dispatch_table.py --family gemm --out "
            "{out}/gemm_sm_90.json --run \"$SIMTLAB_RUN\" && cp {out}/gemm_sm_90.json src/simtlab/ops/tables/", 360)]),
    "gemm-shapes": ("simtlab.gemm_tc and simtlab.gemm beside torch.mm over the real-shape set (the issue's table)", [
        Run("the shape set", "python3 benchmarks/gemm_shapes.py --json {out}/gemm_shapes.json", 560)]),
    "tc": ("the tensor-core ladder", [
        Tests("gemm_tc", "pytest_tc.txt", 300),
        Run("simtlab ladder gemm_tc", f"simtlab ladder gemm_tc {sizes(TC_SIZES)} --json-out {{out}}/gemm_tc_ladder.json",
            400)]),
    "rung6": ("tensor-core rung 6 as it ships: its variants' tests, the top of the ladder, the sanitizer", [
        Tests("cluster or (gemm_tc and api)", "pytest_cluster.txt", 240),
        Run("rungs 5-6 beside cuBLAS and Triton",
            f"simtlab ladder gemm_tc --rung 5 --rung 6 {sizes('4096 4096:bf16 8192 8192:bf16 2048 6144:bf16 8192x1024x8192:bf16 4096:tf32 64x512x512x512:bf16')} "
            "--json-out {out}/gemm_tc_top.json", 240),
        Run("compute-sanitizer on rung 6's defaults",
            "for s in 300x264x520 2x129x136x72:bf16 127x129x72:tf32; do simtlab sanitize gemm_tc --rung wgmma_cluster "
            "--size $s --jobs 8; done", 300)]),
    "fp32": ("the fp32 ladder: tests, the whole ladder at the issue sizes, the top rungs' sanitizer", [
        Tests("gemm and not gemm_tc", "pytest_gemm.txt", 240),
        Run("simtlab ladder gemm", f"simtlab ladder gemm {sizes(FP32_SIZES)} --plot {{out}}/gemm_ladder.png "
            "--json-out {out}/gemm_ladder.json", 500),
        Run("compute-sanitizer on rung 10", "simtlab sanitize gemm --rung tuned --size 2000x2100x301 --jobs 8", 150)]),
    "memory": ("the memory-bound ladders, their ncu counters against the access analyzer, the report", [
        Tests("elementwise or reduction or transpose or branch or boundary", "pytest_memory.txt", 240),
        Run("simtlab ladder elementwise", "simtlab ladder elementwise --json-out {out}/elementwise_ladder.json"),
        Run("simtlab ladder reduction", f"simtlab ladder reduction {sizes('2^30 2^30:max 2^20 1000003')} "
            "--json-out {out}/reduction_ladder.json"),
        Run("simtlab ladder transpose", f"simtlab ladder transpose {sizes('16384 8191x8193 4097x31')} "
            "--json-out {out}/transpose_ladder.json"),
        Run("divergence", "simtlab ladder branch --json-out {out}/branch_ladder.json && simtlab ladder boundary"),
        Run("simtlab access beside Nsight Compute", "simtlab access"),
        Run("simtlab report", "simtlab report -o {out}/report.html")]),
    "conv": ("conv2d and stencil: tests, ladders, block shapes", [
        Tests("conv2d or stencil", "pytest_conv.txt", 300),
        Run("simtlab ladder conv2d", f"simtlab ladder conv2d {sizes('8192:r3 8192:r1 8192:r7 1000x1013:r3')} "
            "--json-out {out}/conv2d_ladder.json"),
        Run("conv2d block shapes", "python3 benchmarks/conv_block_sweep.py --size 8192:r3 --json {out}/conv_block_sweep.json"),
        Run("simtlab ladder stencil", f"simtlab ladder stencil {sizes('512 511x513x257')} "
            "--json-out {out}/stencil_ladder.json")]),
    "rows": ("softmax and layernorm: tests and ladders at every row length", [
        Tests("softmax or layernorm", "pytest_rows.txt", 240),
        Run("simtlab ladder softmax", f"simtlab ladder softmax {sizes(ROW_SIZES)} --json-out {{out}}/softmax_ladder.json"),
        Run("simtlab ladder layernorm", f"simtlab ladder layernorm {sizes(ROW_SIZES)} "
            "--json-out {out}/layernorm_ladder.json")]),
    "row-ops-tests": ("the operators (simtlab.softmax, log_softmax, layer_norm, rms_norm and their backwards, sum, "
                      "amax, cumsum, transpose, sort, argsort): every rung's and call's GPU tests",
                      [Tests("rows or softmax or layernorm or reduction or transpose or scan or sort", "pytest_row_ops.txt", 520,
                             6)]),
    "row-ops": ("the row operators beside PyTorch eager and compiled and the device copy, forward and backward, their "
                "host cost, and the ladders at the operators' sizes (run row-ops-tests first)", [
        Run("row operators beside PyTorch", "python3 benchmarks/row_ops.py --json {out}/row_ops.json", 400),
        Run("simtlab ladder softmax (operators)", "simtlab ladder softmax -s 16384x4096:bf16:log_softmax "
            "-s 16384x4096:bf16:softmax_backward -s 4096x65536:bf16 --json-out {out}/softmax_ops_ladder.json", 60),
        Run("simtlab ladder layernorm (operators)", "simtlab ladder layernorm -s 16384x4096:bf16:rms_norm "
            "-s 16384x4096:bf16:layer_norm_backward --json-out {out}/layernorm_ops_ladder.json", 60)]),
    "ops-once": ("one call for the operators and attention when device time is short: every new GPU test over 8 "
                 "workers, the operators beside PyTorch eager (no compile) at two LLM shapes, sum/amax/cumsum/transpose/"
                 "sort, and the attention ladder", [
        Tests("rows or softmax or layernorm or reduction or transpose or scan or sort or attention or spmv",
              "pytest_ops_once.txt", 270, 8),
        Run("row operators beside PyTorch eager", "python3 benchmarks/row_ops.py --no-compile --no-host "
            "--shapes 16384x4096,4096x32768 --dtypes bf16,fp32 --json {out}/row_ops.json", 80),
        Run("sum, amax, cumsum, transpose, sort beside PyTorch", "python3 benchmarks/row_ops.py --only "
            "sum,amax,cumsum,transpose,sort --no-host --no-compile --shapes 16384x4096,1x268435456 --dtypes fp32,bf16 "
            "--json {out}/reduce_ops.json", 80),
        Run("simtlab ladder attention", "simtlab ladder attention -s 16x4096x128 -s 16x4096x128:causal "
            "-s 4x16384x128:causal --json-out {out}/attention_ladder.json", 90)]),
    "attention-once": ("one call for attention when device time is short: the attention GPU tests over 8 workers, "
                       "simtlab.attention forward and backward beside every SDPA backend at three sequence lengths, "
                       "rungs 3 and 4 kernel-only, the sanitizer", [
        Tests("attention or attention_backward", "pytest_attention.txt", 240, 8),
        attention_table(170, "--seqs 1024,4096,16384"),
        Run("simtlab ladder attention (rungs 3, 4)", "simtlab ladder attention --rung 3 --rung 4 -s 16x4096x128 "
            "-s 4x16384x128:causal --json-out {out}/attention_ladder.json", 70),
        Run("compute-sanitizer on both attention families", "simtlab sanitize attention --rung 3 --rung 4 --size "
            "3x77x130x64:causal --jobs 8 && simtlab sanitize attention_backward --size 3x77x130x64:causal --jobs 8",
            60)]),
    "attention-after": ("after run dee800d: the backward's GPU tests again (a gradient that cancels to zero measured "
                        "against the joined norm), the tests run 511d348 failed, what changed after it timed (norms' "
                        "long rows, a row's transpose, host cost), the attention table at every sequence length, the "
                        "backward's ladder (most wanted first: a short call keeps what it reached)", [
        Tests("attention_backward", "pytest_attention_backward.txt", 150, 8), mended_tests(150), *OPS_AFTER,
        attention_table(200),
        Run("simtlab ladder attention_backward", "simtlab ladder attention_backward -s 16x4096x128 "
            "-s 4x16384x128:causal --json-out {out}/attention_backward_ladder.json", 100)]),
    "attention-ws": ("attention rung 5 (warp-specialised: TMA producer, ping-pong consumers) and the norms' long-row "
                     "backward rewritten after run 4f2f12e: a gate (rung 5 on two shapes), every attention GPU test, "
                     "the ladder's rungs 4-5, the table beside SDPA, the sanitizer, the norms' tests and timings",
                     [*ATTENTION_FWD, mended_tests(80), OPS_AFTER[0]]),
    "attention-fwd": ("attention rung 5 again after a change: the gate, every attention GPU test, the ladder's rungs "
                      "4-5, the table beside SDPA, the sanitizer on rung 5", list(ATTENTION_FWD)),
    "ops-new": ("the conv2d and stencil operators (conv2d rung 8: the filter as an argument) and attention rung 5's "
                "causal order: their GPU tests, the ladders' new rows beside the rungs they come from, the attention "
                "table", [
        Run("gate: simtlab.conv2d and simtlab.stencil once", "python3 -m pytest -q -p no:cacheprovider -x -m gpu "
            "tests/test_conv2d_api_gpu.py::test_views_empty_batches_and_bad_input "
            "tests/test_stencil_api_gpu.py::test_views_empty_grids_and_bad_input", 90, gate=True),
        Tests("api and (conv2d or stencil)", "pytest_conv_stencil_api.txt", 150, 8),
        Tests("conv2d or stencil or attention", "pytest_families.txt", 200, 8),
        Run("simtlab ladder conv2d (rungs 6-8)", "simtlab ladder conv2d --rung 6 --rung 7 --rung 8 -s 8192:r3 -s 8192:r1 "
            "-s 4096:r7 --json-out {out}/conv2d_ladder.json", 90),
        Run("simtlab ladder stencil (rung 4)", "simtlab ladder stencil --rung 4 -s 512 -s 256x300x1001 "
            "--json-out {out}/stencil_ladder.json", 60),
        attention_table(120)]),
    "conv2d-tune": ("conv2d rung 8's block shapes at radius 3 and 7 (its staged taps take registers rung 6's shape "
                    "was not chosen for), then the spmv and sort operators' GPU tests (the generic plan's tensor-map "
                    "slots since their last run)", [
        table_step("conv2d", "8", "8192:r3", "conv2d_filter_arg_8192_r3", 100),
        table_step("conv2d", "8", "4096:r7", "conv2d_filter_arg_4096_r7", 70),
        Tests("api and (spmv or sort)", "pytest_spmv_sort_api.txt", 90, 8)]),
    "conv2d-check": ("conv2d rung 8 at the shapes its tables measured: the operator's GPU tests, then the ladder's rungs "
                     "6 and 8 with the API call", [
        Tests("api and conv2d", "pytest_conv2d_api.txt", 80, 8),
        Run("simtlab ladder conv2d (rungs 6, 8)", "simtlab ladder conv2d --rung 6 --rung 8 -s 8192:r3 -s 4096:r7 "
            "--json-out {out}/conv2d_ladder.json", 70)]),
    "attention-bwd2": ("attention_backward rung 2 (wgmma, built after the last device call, never run): a gate (two "
                       "shapes), every backward GPU test, the ladder's rungs 1-2, the sanitizer on every rung of both "
                       "attention families", [
        Run("gate: backward rung 2 on two shapes", "python3 -m pytest -q -p no:cacheprovider -x -m gpu "
            "tests/test_attention_backward_gpu.py -k 'wgmma and 2x65x65 and bfloat16'", 120, gate=True),
        Tests("attention_backward", "pytest_attention_backward.txt", 150, 8),
        Run("simtlab ladder attention_backward (rungs 1, 2)", "simtlab ladder attention_backward -s 16x4096x128 "
            "-s 4x16384x128:causal -s 32x512x128 --json-out {out}/attention_backward_ladder.json", 100),
        Run("compute-sanitizer on every rung of both attention families", "simtlab sanitize attention_backward --size "
            "3x77x130x64:causal --jobs 8 && simtlab sanitize attention --size 3x77x130x64:causal --jobs 8", 120)]),
    "attention-bwd3": ("the operator's backward on rung 2 (Hopper) and rung 2's overlaps: a gate, every backward "
                       "GPU test, the ladder's rungs 1-2, the operator beside every SDPA backend, where rung 2 stalls",
                       [
        *BWD2_CHECKED,
        Run("simtlab ladder attention_backward (rungs 1, 2)", "simtlab ladder attention_backward -s 16x4096x128 "
            "-s 4x16384x128:causal -s 32x512x128 -s 32x512x64 --json-out {out}/attention_backward_ladder.json", 100),
        attention_table(200),
        Run("ncu: backward rung 2 at 16x4096x128", "bash benchmarks/ncu_profile.sh bwd2 attention_backward 2 "
            "16x4096x128 attention_bwd_wgmma && cd {out} && tar -czf ncu_bwd2.tar.gz ncu_bwd2* && "
            "rm -f ncu_bwd2_source.*", 150)]),
    "attention-bwd4": ("backward rung 2's three-slot ring against two (the sweep) and as the operator runs it "
                       "beside SDPA; the sanitizer on it; where an operator call's host time goes", [
        *BWD2_CHECKED,
        Run("rung 2's ring: two slots or three", "mkdir -p {out}/slots && for s in 16x4096x128 4x16384x128:causal "
            "32x512x128; do python3 benchmarks/param_sweep.py attention_backward wgmma --size $s --param SLOTS=2,3 "
            "--json {out}/slots/$(echo $s | tr ':' '_').json; done; cd {out} && tar -czf slots.tar.gz slots && "
            "rm -rf slots", 120),
        Run("simtlab ladder attention_backward (rungs 1, 2)", "simtlab ladder attention_backward -s 16x4096x128 "
            "-s 4x16384x128:causal -s 32x512x128 -s 32x512x64 --json-out {out}/attention_backward_ladder.json", 100),
        attention_table(200),
        Run("compute-sanitizer on backward rung 2", "simtlab sanitize attention_backward --rung 2 --size "
            "3x77x130x64:causal --jobs 4", 60),
        Run("host cost, layer by layer", "python3 benchmarks/host_profile.py --json {out}/host_profile.json", 90)]),
    "ops-eager": ("the operators' eager autograd twins and kept call_along plans: every operator's GPU tests "
                  "(gradients, streams, graphs, torch.compile), then the host cost layer by layer", [
        Run("every operator's GPU tests", "python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu "
            "tests/test_api_gpu.py tests/test_rows_api_gpu.py tests/test_reduce_api_gpu.py tests/test_spmv_api_gpu.py "
            "tests/test_conv2d_api_gpu.py tests/test_stencil_api_gpu.py tests/test_sort_gpu.py "
            "tests/test_attention_gpu.py tests/test_attention_backward_gpu.py > {out}/pytest_ops.txt 2>&1; rc=$?; "
            "tail -3 {out}/pytest_ops.txt; grep -e ^FAILED -e ^ERROR {out}/pytest_ops.txt | head -40; exit $rc", 330),
        Run("host cost, layer by layer", "python3 benchmarks/host_profile.py --json {out}/host_profile.json", 90)]),
    "attention-persistent": ("attention rung 6 (persistent blocks, built after the last device call) and the "
                             "operator on it: a gate, every attention GPU test, the ladder's rungs 5-6, the table, "
                             "the sanitizer with blocks walking several items", [
        Run("gate: rung 6 and the operator on it", "python3 -m pytest -q -p no:cacheprovider -x -m gpu "
            "tests/test_attention_gpu.py -k '(persistent and (2x65x65 or 200x300x300) and bfloat16) or "
            "test_the_operator_matches_sdpa'", 100, gate=True),
        Tests("attention", "pytest_attention.txt", 130, 8),
        Run("simtlab ladder attention (rungs 5, 6)", "simtlab ladder attention --rung 5 --rung 6 -s 32x512x128 "
            "-s 32x512x128:causal -s 16x1024x128 -s 16x4096x128 -s 4x16384x128:causal "
            "--json-out {out}/attention_ladder.json", 80),
        attention_table(110),
        Run("compute-sanitizer on rung 6, blocks walking several items", "simtlab sanitize attention --rung 6 "
            "--size 150x130x130x64:causal --jobs 4", 60)]),
    "norms-cluster": ("layernorm rung 6 (the backwards with rows staged by bulk copies, long rows split over clusters; "
                      "built after the last device call, never run) and the operators on it: a gate, every layernorm "
                      "GPU test, the norms beside PyTorch eager and compiled, the ladder's rungs 5-6, the sanitizer", [
        NORMS_GATE,
        NORMS_TESTS, NORMS_TABLE,
        NORMS_LADDER,
        Run("compute-sanitizer on rung 6", "simtlab sanitize layernorm --rung 6 --size 333x4104:bf16:layer_norm_backward "
            "--jobs 4 && simtlab sanitize layernorm --rung 6 --size 7x20000:layer_norm_backward --jobs 4 && "
            "simtlab sanitize layernorm --rung 6 --size 333x517:rms_norm_backward --jobs 4", 150)]),
    "norms-final": ("layernorm rung 6 as it ships, when device time is short: the gate, every layernorm and row "
                    "operator GPU test, the norms beside PyTorch eager and compiled, the ladder's rungs 5-6", [
        NORMS_GATE, NORMS_TESTS, NORMS_TABLE, NORMS_LADDER]),
    "norms-sanitize": ("compute-sanitizer on layernorm rung 6 as it ships: a bf16 row split over three blocks "
                       "(the remote stores), teams of rows in clusters over two SMs", [
        Run("compute-sanitizer on rung 6", "simtlab sanitize layernorm --rung 6 --size "
            "33x16392:bf16:layer_norm_backward --jobs 4 && simtlab sanitize layernorm --rung 6 --size "
            "333x4104:bf16:rms_norm_backward --jobs 4", 200)]),
    "spmv-ops": ("simtlab.spmv as users call it beside cuSPARSE (torch.sparse, cupyx) on the ladder's three row "
                 "profiles at 2^22 rows", [
        Run("simtlab.spmv beside cuSPARSE", "python3 benchmarks/spmv_ops.py --json {out}/spmv_ops.json", 150)]),
    "softmax-cluster": ("softmax rung 6 (every operator with rows staged by bulk copies, long rows split over "
                        "clusters; built without a device, never run) and layernorm rung 6 with four exchange "
                        "buffers: a gate, the ladder's rungs 5-6 at the operators' lengths (where the operators "
                        "should take rung 6: softmax.CLUSTER_FROM), every softmax and layernorm GPU test, the "
                        "softmax operators beside PyTorch, the sanitizer", [
        Run("gate: softmax rung 6 on six shapes", "python3 -m pytest -q -p no:cacheprovider -x -m gpu tests/test_gpu.py "
            "-k 'softmax and cluster_rows and (2x65536 or 333x517 or 1500x16392 or 7x4096 or 2x40001 or 6x1000)'",
            150, gate=True),
        Run("simtlab ladder softmax (rungs 5, 6)", "simtlab ladder softmax --rung 5 --rung 6 --target-ms 150 " + " ".join(
            f"-s {shape}:{kind}" for shape in ("65536x1024", "32768x2048", "16384x4096", "8192x8192", "4096x16384",
                                               "4096x32768", "2048x65536")
            for kind in ("bf16", "bf16:softmax_backward")) + " -s 4096x16384:bf16:log_softmax -s 16384x4096:softmax "
            "-s 16384x4096:softmax_backward -s 4096x32768:softmax -s 4096x32768:log_softmax_backward "
            "--json-out {out}/softmax_ladder.json", 240),
        Run("every softmax and layernorm GPU test", "python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu "
            "tests/test_gpu.py tests/test_rows_api_gpu.py -k 'softmax or layernorm or layer_norm or rms_norm' "
            "> {out}/pytest_rows.txt 2>&1; rc=$?; tail -3 {out}/pytest_rows.txt; grep -e ^FAILED -e ^ERROR "
            "{out}/pytest_rows.txt | head -40; exit $rc", 300),
        Run("softmax and log_softmax beside PyTorch, rung 6 from 4096 values", "python3 benchmarks/row_ops.py --only softmax,log_softmax "
            "--no-host --cluster-from 4096 --json {out}/softmax_ops.json", 240),
        Run("compute-sanitizer on both rung 6s", "simtlab sanitize softmax --rung 6 --size 33x16392:bf16:softmax_backward "
            "--jobs 4 && simtlab sanitize softmax --rung 6 --size 333x517:log_softmax --jobs 4 && simtlab sanitize "
            "layernorm --rung 6 --size 33x16392:bf16:layer_norm_backward --jobs 4", 200)]),
    "spmv-plan": ("simtlab.spmv_plan (a matrix prepared once in rung 6's layout; built without a device, never "
                  "run) and rung 6 reading y apart from the y it writes: every SpMV GPU test, the ladder's rungs 4 "
                  "and 6, simtlab.spmv and the plan beside cuSPARSE (torch.sparse, cupyx)", [
        Run("gate: the plan's tests", "python3 -m pytest -q -p no:cacheprovider -x -m gpu tests/test_spmv_api_gpu.py "
            "-k prepared", 150, gate=True),
        Run("every SpMV GPU test", "python3 -m pytest -q -p no:cacheprovider -rfE -n 8 -m gpu tests/test_spmv_gpu.py "
            "tests/test_spmv_api_gpu.py > {out}/pytest_spmv.txt 2>&1; rc=$?; tail -3 {out}/pytest_spmv.txt; "
            "grep -e ^FAILED -e ^ERROR {out}/pytest_spmv.txt | head -40; exit $rc", 200),
        Run("simtlab ladder spmv (rungs 4, 6)", "simtlab ladder spmv --rung 4 --rung 6 --json-out "
            "{out}/spmv_ladder.json", 150),
        Run("simtlab.spmv and the plan beside cuSPARSE", "python3 benchmarks/spmv_ops.py --json {out}/spmv_ops.json",
            200)]),
    "norms-quick": ("layernorm rung 6 against rung 5 at the operators' row lengths, after a gate: the quick look "
                    "between changes", [
        NORMS_GATE,
        NORMS_LADDER]),
    "attention-last": ("the shortest check when device time is nearly gone: the backward's GPU tests (the zero-gradient "
                       "check mended after run dee800d), then the tests run 511d348 failed", [
        Tests("attention_backward", "pytest_attention_backward.txt", 90, 8), mended_tests(90)]),
    "ops-after": ("what changed after run 511d348, timed: the norms' long-row backward, a row's transpose, host cost",
                  list(OPS_AFTER)),
    "reduce-ops": ("simtlab.sum, amax, cumsum and transpose beside PyTorch eager and compiled and the device copy, "
                   "and the reduction and scan ladders' new rungs (run row-ops-tests first)", [
        Run("sum, amax, cumsum, transpose beside PyTorch", "python3 benchmarks/row_ops.py --only "
            "sum,amax,cumsum,transpose,sort --no-host --no-compile "
            "--shapes 65536x1024,16384x4096,4096x32768,64x1048576,1x268435456 --json {out}/reduce_ops.json", 300),
        Run("simtlab ladder reduction", "simtlab ladder reduction --rung 8 --rung 9 --rung 10 -s 268435456 "
            "-s 268435456:max --json-out {out}/reduction_ladder.json", 90),
        Run("simtlab ladder scan", "simtlab ladder scan --rung 6 --rung 7 -s 268435456 -s 268435456:int32 "
            "--json-out {out}/scan_ladder.json", 90)]),
    "scan": ("the scan ladder: tests (every rung, fp32 and int32, odd lengths), the ladder, rung 6's tile and order", [
        Tests("scan", "pytest_scan.txt", 200),
        Run("simtlab ladder scan", f"simtlab ladder scan {sizes('2^28 2^28:int32 2^24')} --json-out {{out}}/scan_ladder.json"),
        Run("rung 6's block, elements a thread and tile order", "python3 benchmarks/param_sweep.py scan striped_lookback "
            "--size 2^28 --param BLOCK=128,256,512 --param ITEMS=8,12,16 --param ORDER=0,1 --json {out}/scan_sweep.json",
            200),
        Run("ncu: scan rung 6 at 2^28", "bash benchmarks/ncu_profile.sh scan6 scan 6 2^28 scan_striped_lookback && "
            "cd {out} && tar -czf ncu_scan6.tar.gz ncu_scan6* && rm -f ncu_scan6.txt ncu_scan6_source.*", 150)]),
    "spmv": ("the SpMV ladder: tests (every rung on every matrix class), the ladder at 4M rows", [
        Tests("spmv", "pytest_spmv.txt", 200),
        Run("simtlab ladder spmv", f"simtlab ladder spmv {sizes('2^22:uniform 2^22:powerlaw 2^22:banded')} "
            "--json-out {out}/spmv_ladder.json", 300),
        Run("rung 5's piece size and block", "python3 benchmarks/param_sweep.py spmv sell_split --size 2^22:powerlaw "
            "--param CHUNK=128,256,512,1024,2048 --param BLOCK=128,256 --json {out}/spmv_split_sweep.json", 200)]),
    "sort": ("the sort ladder: tests (every rung, uint32 and float32 keys, pairs, odd lengths), the ladder", [
        Tests("sort", "pytest_sort.txt", 240),
        Run("rung 4's ranking by match_any, ballots or both in turn, one process a problem",
            "for s in 2^24 2^28 2^28:float32 2^24:pairs; do python3 benchmarks/param_sweep.py sort radix_onesweep "
            "--size $s --param MATCH=0,1,2 --json {out}/sort_match_$(echo $s | tr '^:' '__').json; done", 300),
        Run("simtlab ladder sort", f"simtlab ladder sort {sizes('2^24 2^28 2^28:float32 2^24:pairs 2^28:pairs')} "
            "--json-out {out}/sort_ladder.json", 300)]),
    "issue32": ("the scan, sort and SpMV ladders as they ship: their GPU tests and ladders in one run", [
        Tests("scan or sort or spmv", "pytest_32.txt", 300),
        Run("simtlab ladder scan", f"simtlab ladder scan {sizes('2^28 2^28:int32 2^24')} --json-out {{out}}/scan_ladder.json",
            100),
        Run("simtlab ladder sort", f"simtlab ladder sort {sizes('2^24 2^28 2^28:float32 2^24:pairs 2^28:pairs')} "
            "--json-out {out}/sort_ladder.json", 200),
        Run("simtlab ladder spmv", f"simtlab ladder spmv {sizes('2^22:uniform 2^22:powerlaw 2^22:banded')} "
            "--json-out {out}/spmv_ladder.json", 200),
        Run("compute-sanitizer on SpMV rung 6 (pieces, several row blocks and column chunks)",
            "simtlab sanitize spmv --rung row_blocks --size 100003:powerlaw --jobs 4", 200)]),
    "profile-32": ("where the sort, scan and SpMV top rungs spend (Nsight Compute sections and per-instruction "
                   "stall samples)", [
        Run("ncu: scan rung 5 at 2^28", "bash benchmarks/ncu_profile.sh scan5 scan 5 2^28 scan_decoupled_lookback", 150),
        Run("ncu: sort rung 4's second digit pass at 2^28",
            "bash benchmarks/ncu_profile.sh sort4 sort 4 2^28 sort_radix_onesweep 3", 150),
        Run("ncu: SpMV rung 5 on power-law rows", "bash benchmarks/ncu_profile.sh spmv5 spmv 5 2^22:powerlaw "
            "spmv_sell_split", 150),
        Run("pack", "cd {out} && tar -czf ncu32.tar.gz ncu_* && rm -f ncu_*", 30)]),
    "beyond": ("intrinsics, host transfers and CUDA graphs", [
        Tests("intrinsics", "pytest_intrinsics.txt", 120),
        Run("intrinsics", "python3 benchmarks/intrinsics_table.py --json {out}/intrinsics.json"),
        Run("simtlab transfers", "simtlab transfers"), Run("simtlab graphs", "simtlab graphs")]),
    "tune": ("the tuner on every family with a space: small searches, the CLI's resume", [
        Tests("tune or ladder", "pytest_tune.txt", 300),  # (a model search builds its space first)
        Run("gemm rung 10", "simtlab tune gemm --rung tuned --size 2048 --strategy model --budget 24 --target-ms 20"),
        Run("gemm_tc rung 6", "simtlab tune gemm_tc --rung 6 --size 4096:bf16 --strategy random --budget 12 "
            "--target-ms 20"),
        Run("conv2d rung 7", "simtlab tune conv2d --rung tma --size 8192:r3 --strategy random --budget 12 "
            "--target-ms 20")]),
    "tunetable": ("every valid configuration of gemm/10_tuned at 2048^3, in random order, until the time budget",
                  [table_step("gemm", "tuned", "2048", "tune_table")]),
    # More measured spaces for the tuner's replays (one phase each: a table takes most of a call)
    "table-gemm-1024k": ("every configuration of gemm/10_tuned at 4096x4096x1024 (another optimum)",
                         [table_step("gemm", "tuned", "4096x4096x1024", "table_gemm_tuned_4096x4096x1024")]),
    "live-gemm": ("simtlab tune gemm --rung tuned at 4096x4096x1024 at 10% of its space (104), as a user runs it",
                  [live_step("gemm", "tuned", "4096x4096x1024", 104, "live_gemm_4096x4096x1024")]),
    "live-all": ("simtlab tune at 10% of each measured space, as a user runs it, with the default as it now is; "
                 "conv2d rung 6's measured shapes in the ladder", [
        live_step("gemm", "tuned", "4096x4096x1024", 104, "live_gemm_4096x4096x1024"),
        live_step("gemm_tc", "wgmma_cluster", "4096:bf16", 42, "live_gemm_tc_4096"),
        live_step("gemm_tc", "wgmma_cluster", "8192x1024x8192:bf16", 42, "live_gemm_tc_8192x1024x8192"),
        live_step("conv2d", "pipelined", "8192:r3", 76, "live_conv2d_r3"),
        live_step("conv2d", "pipelined", "8192:r1", 76, "live_conv2d_r1"),
        # (--shipped: rung 6 at its shipped shapes, the brute-force optimum of its committed tables,
        # beside what the live searches found - which the ladder would otherwise take from the store)
        Run("conv2d rungs 5-7 at radius 1 and 3", f"simtlab ladder conv2d --rung 5 --rung 6 --rung 7 "
            f"{sizes('8192:r3 8192:r1')} --shipped --json-out {{out}}/conv2d_top.json", 200)]),
    "live-rows": ("simtlab tune at 10% of the memory-bound spaces (softmax rung 4, layernorm rung 3 at 131072x1024), "
                  "the points whose lanes cannot hold the row left out before the search, and of gemm rung 8 at "
                  "2048^3 (the held-out miss)", [
        live_step("softmax", "vectorized", "131072x1024", 11, "live_softmax_131072x1024"),
        live_step("layernorm", "two_sums", "131072x1024", 18, "live_layernorm_131072x1024"),
        live_step("gemm", "warptiling", "2048", 35, "live_gemm_warptiling_2048")]),
    "tune-api": ("simtlab tune gemm_tc rung 6 at 10% of its space at the API shapes under target (bf16 C: batched "
                 "64x512^3, 2048^3, 8192x1024x8192), then the API table beside torch from the same store - the "
                 "tuned rows are what simtlab.gemm_tc builds at those shapes", [
        *(Run(f"simtlab tune gemm_tc rung 6 at {s}", f"simtlab tune gemm_tc --rung 6 --size {s} --budget 42 --json "
              f"> {{out}}/tune_api_{s.split(':')[0]}.json", 240)
          for s in ("64x512x512x512:bf16:bf16", "2048:bf16:bf16", "8192x1024x8192:bf16:bf16")),
        Run("the calls beside torch, every case, tuned where tuned", "python3 benchmarks/api_bench.py "
            "--json {out}/api_tuned.json", 400)]),
    "sort-space": ("every configuration of sort rung 4 (BLOCK, ITEMS, STAGED, EARLY) at 2^28 keys, 2^28 float32 keys and "
                   "2^24 pairs", [
        table_step("sort", "radix_onesweep", s, f"table_sort_{s.replace(':', '_')}", seconds=100)
        for s in ("268435456", "268435456:float32", "16777216:pairs")]),
    "table-warptiling": ("every configuration of gemm/08_warptiling at 2048^3 (354: another kernel's space)",
                         [table_step("gemm", "warptiling", "2048", "table_gemm_warptiling_2048", seconds=330)]),
    "table-warptiling-more": ("every configuration of gemm/08_warptiling at 4096^3 and 4096x4096x1024 (measured after "
                              "the tuner's default was chosen: its held-out test)", [
        table_step("gemm", "warptiling", s, f"table_gemm_warptiling_{s}", seconds=330 if s == "4096" else 200)
        for s in ("4096", "4096x4096x1024")]),
    "table-tc": ("every configuration of gemm_tc rung 6 at 4096^3 bf16 (416), then simtlab tune at 10% of it", [
        table_step("gemm_tc", "wgmma_cluster", "4096:bf16", "table_gemm_tc_4096", seconds=220),
        live_step("gemm_tc", "wgmma_cluster", "4096:bf16", 42, "live_gemm_tc_4096")]),
    "table-tc-flat": ("every configuration of gemm_tc rung 6 at 8192x1024x8192 bf16 (few tiles, deep K: another optimum)", [
        table_step("gemm_tc", "wgmma_cluster", "8192x1024x8192:bf16", "table_gemm_tc_8192x1024x8192", seconds=150)]),
    "table-conv": ("every configuration of conv2d rung 6 at 8192^2 radius 3 (760), then simtlab tune at 10% of it", [
        table_step("conv2d", "pipelined", "8192:r3", "table_conv2d_r3", seconds=190),
        live_step("conv2d", "pipelined", "8192:r3", 76, "live_conv2d_r3")]),
    "table-conv-r1": ("every configuration of conv2d rung 6 at 8192^2 radius 1 (760: another optimum)",
                      [table_step("conv2d", "pipelined", "8192:r1", "table_conv2d_r1", seconds=200)]),
    "table-rows": ("every configuration of the register-row rungs (memory-bound) at 131072x1024: softmax rung 4 (110, "
                   "71 hold the row) and layernorm rung 3 (180, 104); the rest fail, by name", [
        table_step("softmax", "vectorized", "131072x1024", "table_softmax_131072x1024", seconds=100),
        table_step("layernorm", "two_sums", "131072x1024", "table_layernorm_131072x1024", seconds=120)]),
    "tf32x3": ("fp32 on the tensor cores (3xTF32, rung 11): tests, the accuracy and speed table, the ladder's "
               "top rows, the sanitizer", [
        Tests("gemm and api", "pytest_tf32x3.txt", 200),
        Run("accuracy and speed beside cuBLAS and Triton", "python3 benchmarks/tf32x3_table.py --splits 2,4 --json {out}/tf32x3.json",
            300),
        Run("rungs 10-11 beside cuBLAS and Triton", f"simtlab ladder gemm --rung 10 --rung 11 "
            f"{sizes('4096 4097x4095x4093')} --json-out {{out}}/gemm_top.json", 240),
        Run("compute-sanitizer on rung 11", "for s in 127x129x65 300x264x520 1000x1013x37; do simtlab sanitize gemm "
            "--rung tf32x3 --size $s --jobs 8; done", 200)]),
    "f16x3": ("fp32 from three fp16 products (rung 13) through simtlab.gemm(precision='f16x3'): the fp32 "
              "tensor-core GPU tests (rungs 11-13, the plans), the accuracy and speed table beside rung 11, "
              "cuBLAS and Triton, the ladder's top rows, the sanitizer", [
        Run("the fp32 tensor-core GPU tests", "python3 -m pytest -q -m gpu tests/test_f16x3_gpu.py tests/test_tf32x3_gpu.py "
            "tests/test_gpu.py -k 'f16x3 or rung_13 or tf32x3 or rung_11 or rung_12' -p no:cacheprovider 2>&1 | tail -8", 240),
        Run("accuracy and speed beside cuBLAS and Triton", "python3 benchmarks/tf32x3_table.py --f16x3 --json {out}/f16x3.json",
            300),
        Run("rungs 10, 11 and 13 beside cuBLAS and simtlab.gemm at each precision (API rows)",
            f"simtlab ladder gemm --rung 10 --rung 11 --rung 13 "
            f"{sizes('4096 8192 4097x4095x4093')} --json-out {{out}}/gemm_top.json", 300),
        Run("compute-sanitizer on rung 13", "for s in 127x129x65 300x264x520 1000x1013x37; do simtlab sanitize gemm "
            "--rung f16x3 --size $s --jobs 8; done", 200)]),
    "tf32x3-sk": ("rung 11 with the last round's tiles cut into chunks of K (SK 1): its GPU tests, the speed table "
                  "beside SK 0 and KEEP 3 / 4 in one process, memcheck and initcheck on a cut tile's scratch", [
        Run("rung 11's GPU tests", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py -k 'rung_11' "
            "-p no:cacheprovider 2>&1 | tail -8", 240),
        Run("speed beside cuBLAS and Triton, SK and KEEP", "python3 benchmarks/tf32x3_table.py --only speed "
            "--variant SK=1,KEEP=3 --variant SK=0,KEEP=3 --json {out}/tf32x3_sk.json", 240),
        Run("memcheck and initcheck on SK 1", "for t in memcheck initcheck; do compute-sanitizer --tool $t "
            "--error-exitcode 1 python3 -m pytest -q -p no:cacheprovider 'tests/test_tf32x3_gpu.py::"
            "test_rung_11_split_last_round_matches_float64_on_a_poisoned_c[-0.75-1.5-3000x2900x333-extra3]' 2>&1 | tail -3; "
            "done", 200)]),
    "tf32x3-areg": ("rung 11 with A split in registers by the main loop (AREG 1: no pre-pass for A, B's parts in A's "
                    "fragment order), beside the pre-pass and EPI 2 in one process: its GPU tests, the accuracy and "
                    "speed tables, memcheck and initcheck (run 72d72f also timed STAGGER, a knob since removed)", [
        Run("rung 11's GPU tests", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py -k 'rung_11' "
            "-p no:cacheprovider 2>&1 | tail -8", 240),
        Run("accuracy and speed beside cuBLAS and Triton, AREG and EPI", "python3 benchmarks/tf32x3_table.py "
            "--variant AREG=1,EPI=2 --variant EPI=2 --json {out}/tf32x3_areg.json", 300),
        Run("memcheck and initcheck on AREG", "for t in memcheck initcheck; do compute-sanitizer --tool $t "
            "--error-exitcode 1 python3 -m pytest -q -p no:cacheprovider tests/test_tf32x3_gpu.py "
            "-k 'areg_scales' 2>&1 | tail -3; done", 200)]),
    "tf32x3-mma": ("rung 12 (3xTF32 with mma.sync, the sm_80 path): its GPU tests, the accuracy table beside rung 11, "
                   "SGEMM, TF32 and Triton, rungs 10-12 in the ladder, the sanitizer", [
        Run("rung 12's and rung 11's GPU tests", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py tests/test_gpu.py "
            "-k 'tf32x3' -p no:cacheprovider 2>&1 | tail -15", 240),
        Run("accuracy beside cuBLAS and Triton", "python3 benchmarks/tf32x3_table.py --rung12 --only accuracy "
            "--json {out}/tf32x3_rung12.json", 200),
        Run("rungs 10-12 beside cuBLAS and Triton", f"simtlab ladder gemm --rung 10 --rung 11 --rung 12 "
            f"{sizes('4096 8192 4097x4095x4093')} --json-out {{out}}/gemm_top.json", 240),
        Run("compute-sanitizer on rung 12", "for s in 127x129x65 300x264x520 1000x1013x37; do simtlab sanitize gemm "
            "--rung tf32x3_mma --size $s --jobs 8; done", 200)]),
    "tf32x3-prepass": ("rung 11 with the vectorised split pre-pass, promotion windows by pass (SPLIT slices of big x "
                       "big, 16 of the small passes), rows and columns near the smallest normal rescaled, float64 sums "
                       "below K = 64: its GPU tests, the accuracy and speed table (rung 11 at SPLIT 1, 2 and 4 beside "
                       "the call), the sanitizer (the rescaling pass too)", [
        Run("rung 11's and rung 12's GPU tests, the short-K path", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py "
            "tests/test_gpu.py -k 'tf32x3 or warptiling' -p no:cacheprovider 2>&1 | tail -15", 240),
        Run("accuracy and speed beside cuBLAS and Triton", "python3 benchmarks/tf32x3_table.py --splits 1,2,4 "
            "--json {out}/tf32x3.json", 300),
        Run("compute-sanitizer on rung 11", "for s in 127x129x65 300x264x520 1000x1013x37; do simtlab sanitize gemm "
            "--rung tf32x3 --size $s --jobs 8; done", 200),
        Run("memcheck on the rescaling pass", "compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest -q "
            "-p no:cacheprovider tests/test_tf32x3_gpu.py -k rescales_only 2>&1 | tail -4", 200)]),
    "tf32x3-mma-tiny": ("rung 12 (the sm_80 path) with the note and exponents passes for values near the smallest "
                        "normal: the 3xTF32 GPU tests, the accuracy table with rung 12's rows, the sanitizer", [
        Run("the 3xTF32 GPU tests", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py tests/test_gpu.py "
            "-k 'tf32x3' -p no:cacheprovider 2>&1 | tail -15", 240),
        Run("accuracy beside cuBLAS and Triton", "python3 benchmarks/tf32x3_table.py --rung12 --only accuracy "
            "--json {out}/tf32x3_rung12.json", 200),
        Run("compute-sanitizer on rung 12", "simtlab sanitize gemm --rung tf32x3_mma --size 127x129x65 --jobs 8; "
            "compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest -q -p no:cacheprovider "
            "tests/test_tf32x3_gpu.py -k 'scales_tiny and 127' 2>&1 | tail -4", 200)]),
    "tf32x3-once": ("rung 12 splitting each slice once in shared memory (ONCE 1) against on every read: tests, "
                    "one process at three sizes", [
        Run("rung 12's GPU tests", "python3 -m pytest -q -m gpu tests/test_tf32x3_gpu.py -k 'rung_12 or tf32x3_mma' "
            "-p no:cacheprovider 2>&1 | tail -6", 150),
        Run("ONCE 0 / 1, one process a size", "for s in 4096 8192 4097x4095x4093; do python3 benchmarks/param_sweep.py "
            "gemm tf32x3_mma --size $s --param ONCE=0,1 --json {out}/tf32x3_once_$s.json; done", 200)]),
    "epi16": ("rung 6's 16-bit C in 64x64 pieces (WIDE 1) against 64x32 (WIDE 0), one process", [
        Run("WIDE 0 and 1", "for s in 4096:bf16:bf16 4096:fp16:fp16 8192:bf16:bf16 2048:bf16:bf16 "
            "64x512x512x512:bf16:bf16 8192x1024x8192:bf16:bf16; do python3 benchmarks/param_sweep.py gemm_tc "
            "wgmma_cluster --size $s --param WIDE=0,1,0,1 --json {out}/wide_$(echo $s | tr ':' '_').json; done", 400)]),
    "same": ("every family's ladder at sizes that runs before the architecture steps hold, for simtlab compare "
             "(issue 30: the same ladders print the same figures)", [
        Run("memory-bound ladders", f"simtlab ladder elementwise && simtlab ladder reduction {sizes('2^30 2^20')} && "
            f"simtlab ladder transpose {sizes('16384 8191x8193')}", 200),
        Run("conv2d, stencil, softmax, layernorm", f"simtlab ladder conv2d {sizes('8192:r3')} && simtlab ladder stencil "
            f"{sizes('512')} && simtlab ladder softmax {sizes('32768x4096 1048576x128')} && simtlab ladder layernorm "
            f"{sizes('32768x4096 1048576x128')}", 200),
        Run("the GEMM ladders", f"simtlab ladder gemm_tc {sizes('4096:bf16 8192')} && simtlab ladder gemm {sizes('4096')}",
            300)]),
    "shapes": ("rung 6's configurations at the API shapes under target (batched 64x512^3, 2048^3), one process each", [
        Run("batched 64x512^3", "python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size 64x512x512x512:bf16:bf16 "
            "--param BN=128,256 --param CM=1,2 --param STAGES=3,4,5,6 --param KEEP=4,5 --json {out}/shapes_batched.json",
            300),
        Run("2048^3", "python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size 2048:bf16:bf16 --param BN=128,256 "
            "--param CM=1,2 --param STAGES=4,5 --json {out}/shapes_2048.json", 150)]),
    "batched": ("batched 64x512^3 bf16: which kernel cuBLAS picks, and rung 6's tile height, cluster shape, tile order "
                "and C pieces there, one process", [
        Run("the libraries' kernels", "python3 benchmarks/library_kernels.py --shape 64x512x512x512 --shape 2048x2048x2048 "
            "--json {out}/library_kernels.json", 120),
        Run("rung 6, 128-row tiles", "python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size 64x512x512x512:bf16:bf16 "
            "--param CM=1,2 --param CN=1,2 --param GROUP_M=8,16 --param WIDE=0,1 --param KEEP=5 "
            "--json {out}/batched_128.json", 240),
        Run("rung 6, 64-row tiles", "python3 benchmarks/param_sweep.py gemm_tc wgmma_cluster --size 64x512x512x512:bf16:bf16 "
            "--param BM=64 --param CM=1,2 --param CN=1,2 --param STAGES=4,6 --param KEEP=4 "
            "--json {out}/batched_64.json", 200)]),
    "pairs-words": ("sort rung 4 with a key and its value staged as one 8-byte word (STAGED 2) beside STAGED 1, "
                    "pairs at 2^24 and 2^28, one process each point; the sort GPU tests first", [
        Run("sort GPU tests", "python3 -m pytest -q -p no:cacheprovider -rfE tests/test_sort_gpu.py", 300),
        Run("2^24 and 2^28 pairs", "for s in 24 28; do python3 benchmarks/param_sweep.py sort radix_onesweep "
            "--size 2^$s:pairs --param STAGED=1,2 --param ITEMS=8,12,16 --param REGS=0,64,80 --timeout 120 "
            "--json {out}/pairs_words_2p$s.json; done", 400)]),
    "sort-bits": ("sort rung 4's digit width (BITS 5-8: 7 to 4 passes) at each key type's defaults, keys and "
                  "pairs at 2^24 and 2^28, one process each point; the sort GPU tests first", [
        Run("sort GPU tests", "python3 -m pytest -q -p no:cacheprovider -rfE tests/test_sort_gpu.py", 300),
        Run("BITS 5-8", "for s in 2^24 2^28 2^28:float32 2^24:pairs 2^28:pairs; do python3 benchmarks/param_sweep.py "
            "sort radix_onesweep --size $s --param BITS=5,6,7,8 --timeout 120 "
            "--json {out}/sort_bits_$(echo $s | tr '^:' '__').json; done", 420)]),
    "sort-skip": ("the sort ladder with rung 5 (passes whose digit all keys share skipped on the device) on "
                  "full-range keys and on keys below 2^16 and 2^24, beside rung 4, CUB and torch.sort", [
        Run("simtlab ladder sort", f"simtlab ladder sort {sizes('2^24 2^28 2^28:float32 2^24:pairs 2^28:pairs')} "
            "--json-out {out}/sort_ladder.json", 300),
        Run("simtlab ladder sort, keys below 2^16 and 2^24", "simtlab ladder sort --rung 4 --rung 5 "
            f"{sizes('2^28:bits16 2^28:bits24 2^24:bits16:pairs 2^28:bits24:pairs')} "
            "--json-out {out}/sort_ladder_bits.json", 200)]),
    "sort-global": ("sort rung 5 with its chosen arrays asserted global (GLOBAL 1: LDG/STG instead of generic "
                    "LD/ST) beside GLOBAL 0, keys and pairs at 2^24 and 2^28, one process each point; the sort GPU "
                    "tests first", [
        Run("sort GPU tests", "python3 -m pytest -q -p no:cacheprovider -rfE tests/test_sort_gpu.py", 300),
        Run("GLOBAL 0 and 1", "for s in 2^24 2^28 2^28:float32 2^24:pairs 2^28:pairs; do python3 "
            "benchmarks/param_sweep.py sort radix_skip --size $s --param GLOBAL=0,1 --timeout 120 "
            "--json {out}/sort_global_$(echo $s | tr '^:' '__').json; done", 300)]),
    "call-cost": ("where a large 3xTF32 call's time goes besides its kernels (allocations by the call, a plan, a "
                  "kernel call), and the libraries' kernels at the batched and 2048^3 shapes (bf16 C)", [
        Run("3xTF32 at 8192^3 and 4096^3", "for s in 8192 4096; do python3 benchmarks/tf32x3_call_cost.py --size $s "
            "--json {out}/tf32x3_call_cost_$s.json; done", 300),
        Run("the libraries' kernels", "python3 benchmarks/library_kernels.py --shape 64x512x512x512 --shape 2048x2048x2048 "
            "--json {out}/library_kernels.json", 120)]),
    "kahan": ("the Kahan-compensated fp32 GEMM beside plain and cuBLAS",
              [Run("kahan table", "python3 benchmarks/kahan_table.py --json {out}/kahan.json")]),
    "check": ("the occupancy model against the driver", [Run("occupancy", "python3 benchmarks/occupancy_check.py")]),
    "multi": ("the distributed GEMM and the tuner on every GPU (a machine of several GPUs)", [
        Run("distributed GEMM tests", "python3 -m pytest -q -p no:cacheprovider -rfE tests/test_dist.py", 120),
        Run("distributed GEMM", "for algo in summa rows; do torchrun --standalone --nproc_per_node $(nvidia-smi -L | wc -l) "
            "benchmarks/dist_gemm.py --size 8192 --algo $algo --json {out}/dist_gemm.jsonl; done"),
        Run("simtlab tune --gpus all", "simtlab tune gemm --rung tuned --size 1024 --strategy random --budget 6 "
            "--gpus all --fresh")]),
}


class Log:
    """Lines to the console and to $OUT/log.txt."""

    def __init__(self, path: Path):
        self.file = open(path, "a")

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def _stream(command: str, timeout: int, log: Log, into: Path | None = None) -> int:
    """Run a shell command, its output to the log (or, for tests, to `into` with the summary
    logged); killed with its process group at `timeout`, hung or not."""
    proc = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    killed = threading.Event()

    def kill():
        killed.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill)
    timer.start()
    out = open(into, "w") if into else None
    try:
        for line in proc.stdout:
            if out:
                out.write(line)
            if not out or line.startswith(("FAILED", "ERROR")) or " passed" in line or " failed" in line:
                log(line.rstrip("\n"))
        rc = proc.wait()
    finally:
        timer.cancel()
        if out:
            out.close()
    if killed.is_set():
        log(f"!! stopped after {timeout} s")
        return 124
    return rc


def run_step(step, out: Path, log: Log) -> int:
    if isinstance(step, Tests):
        select = "" if step.markers is None else f"-m {shlex.quote(f'gpu and ({step.markers})')}"
        log(f"== GPU tests: {step.markers or 'the whole suite'} ({step.log})")
        workers = f"-n {step.workers} -v " if step.workers else ""  # (-v: each result as it lands, kept if stopped)
        return _stream(f"python3 -m pytest -q -p no:cacheprovider -rfE {workers}{select}", step.timeout, log,
                       out / step.log)
    log(f"== {step.title}")
    return _stream(step.command.format(out=out), step.timeout, log)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("phases", nargs="*", help="phases to run, in order (--list shows them)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"), help="output folder (default: $OUT or ./out)")
    ap.add_argument("--no-install", action="store_true", help="skip the offline install of the working tree")
    ap.add_argument("--list", action="store_true", help="list the phases and their steps")
    args = ap.parse_args()
    if args.list or not args.phases:
        for name, (what, steps) in PHASES.items():
            print(f"{name:16} {what}")
            for s in steps:
                print(f"{'':16}- {'tests: ' + (s.markers or 'all') if isinstance(s, Tests) else s.title}")
        return 0
    unknown = [p for p in args.phases if p not in PHASES]
    if unknown:
        print(f"unknown phase(s) {', '.join(unknown)}; phases: {', '.join(PHASES)}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(PYTHONUNBUFFERED="1", COLUMNS="200", SIMTLAB_DB=str(out / "results.db"))
    log = Log(out / "log.txt")
    log(f"== {' '.join(args.phases)}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}, "
        f"commit {os.environ.get('SIMTLAB_COMMIT', 'unknown')}")
    _stream("nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv", 30, log)
    if not args.no_install:
        wheels = Path(".whl").resolve()
        _stream(f"PIP_NO_INDEX=1 PIP_FIND_LINKS={wheels} PIP_DISABLE_PIP_VERSION_CHECK=1 "
                "python3 -m pip install -q -e '.[dev]' 2>&1 | tail -3", 300, log)
    failed = []
    for phase in args.phases:
        what, steps = PHASES[phase]
        log(f"=== phase {phase}: {what}")
        for step in steps:
            if run_step(step, out, log) != 0:
                failed.append(f"{phase}: {step.title if isinstance(step, Run) else step.log}")
                if isinstance(step, Run) and step.gate:
                    log(f"!! gate failed: the rest of phase {phase} skipped")
                    break
    log(f"== done {datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}" +
        (f"; steps that failed: {'; '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
