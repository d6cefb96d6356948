import time

import pytest

from simtlab.tune import tune
from simtlab.tune.worker import EvaluationCrashed, EvaluationFailed, EvaluationTimeout, IsolatedEvaluator, Precompiler

import tune_objectives  # (beside this file: pytest puts the folder on sys.path, which a spawned child inherits)

FACTORY = tune_objectives.sleepy


def test_a_hang_is_killed_recorded_as_timeout_and_the_sweep_goes_on():
    configs = [{"x": x} for x in (1, 2, 3, 4, -1, 5)]
    with IsolatedEvaluator(FACTORY, {"hang_on": 3}, timeout_s=3.0) as ev:
        t0 = time.monotonic()
        result = tune(configs, ev, "brute", budget=len(configs))
        assert time.monotonic() - t0 < 60
        assert ev.restarts == 1
    status = {e.config["x"]: (e.status, e.value) for e in result.evaluations}
    assert status[3][0] == "timeout" and status[-1][0] == "failed"
    assert status[4] == ("ok", 4.5) and status[5] == ("ok", 5.5)  # measured by the fresh child
    assert result.best.value == 1.5


def test_a_dying_process_is_reported_as_crashed():
    with IsolatedEvaluator(FACTORY, {"hang_on": -99, "die_on": 2}, timeout_s=30) as ev:
        assert ev({"x": 1}) == 1.5
        with pytest.raises(EvaluationCrashed, match="died"):
            ev({"x": 2})
        assert ev({"x": 6}) == 6.5
        with pytest.raises(EvaluationFailed, match="negative x"):
            ev({"x": -4})


def test_a_child_that_cannot_start_says_why():
    with IsolatedEvaluator(tune_objectives.broken, timeout_s=5) as ev:
        with pytest.raises(EvaluationCrashed, match="no GPU here"):
            ev({"x": 1})
    with pytest.raises(EvaluationTimeout):
        raise EvaluationTimeout("is a TimeoutError") from None


def test_precompiler_fills_the_cache_from_worker_processes(tmp_path, monkeypatch):
    from simtlab.catalog import family
    from simtlab.launch import build
    from simtlab.ops.gemm import gemm_warptile

    monkeypatch.setenv("SIMTLAB_CACHE_DIR", str(tmp_path))
    space = gemm_warptile()
    configs = space.valid()[:2]
    with Precompiler("gemm", "tuned", "sm_90", workers=2, complete=space.complete) as pc:
        pc.submit(configs)
        for c in configs:
            pc.wait(c, timeout=600)
        codes = [pc.identity(c) for c in configs]  # (each build's compiled code, names aside)
        assert all(codes) and codes[0] != codes[1] and pc.identity({"unsubmitted": 1}) is None
    assert len(list(tmp_path.rglob("*.cubin"))) == 2
    t0 = time.monotonic()
    build(family("gemm").rung("tuned"), space.complete(configs[0]), "sm_90")  # a cache hit now
    assert time.monotonic() - t0 < 2.0


def test_a_dead_compiler_does_not_end_the_sweep(tmp_path, monkeypatch):
    """A compiling process that dies breaks its pool; the next batch gets a fresh pool instead of an
    internal error (the configurations the dead pool held compile where they are measured)."""
    from simtlab.ops.gemm import gemm_warptile

    monkeypatch.setenv("SIMTLAB_CACHE_DIR", str(tmp_path))
    space = gemm_warptile()
    first, second = space.valid()[:1], space.valid()[1:2]
    with Precompiler("gemm", "tuned", "sm_90", workers=1, complete=space.complete) as pc:
        pc.submit(first)
        for proc in list(pc._pool._processes.values()):
            proc.kill()
        pc.wait(first[0], timeout=120)  # its future fails with BrokenProcessPool: swallowed
        pc.submit(second)
        pc.wait(second[0], timeout=600)
    assert len(list(tmp_path.rglob("*.cubin"))) >= 1


def test_parse_gpus():
    from simtlab.tune.worker import parse_gpus

    assert parse_gpus(None, 4) == [0] and parse_gpus("all", 3) == [0, 1, 2] and parse_gpus("2,0", 4) == [2, 0]
    for bad, why in (("5", "GPUs are 0..3"), ("0,0", "at most once"), ("x", "comma-separated"), ("all", "no GPU")):
        with pytest.raises(ValueError, match=why):
            parse_gpus(bad, 0 if why == "no GPU" else 4)


def test_one_worker_per_gpu_spreads_the_batch_and_records_in_order(monkeypatch):
    """Three measuring children, each pinned to its 'GPU': every configuration measured exactly once,
    all three used, records in proposal order, the same values a single worker gives."""
    from simtlab.tune.worker import gpu_evaluators

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    configs = [{"x": x} for x in range(12)]
    workers = gpu_evaluators(tune_objectives.which_gpu, {}, [0, 1, 2], timeout_s=30)
    try:
        res = tune(configs, workers, "brute", budget=12, batch=6)
    finally:
        for w in workers:
            w.close()
    assert [e.config["x"] for e in res.evaluations] == list(range(12))
    gpus_used = {round(e.value * 100) % 10 for e in res.evaluations}
    assert gpus_used == {0, 1, 2}
    assert [int(e.value // 10) for e in res.evaluations] == list(range(12))
    single = tune(configs, lambda c: float(c["x"]) * 10, "brute", budget=12)
    assert [int(e.value // 10) for e in single.evaluations] == [int(e.value // 10) for e in res.evaluations]


def test_a_sticky_cuda_error_restarts_the_measuring_process():
    """A configuration that faults loses its process's CUDA context: only it fails; the next ones
    are measured by a fresh child."""
    configs = [{"x": x} for x in (1, 2, 3, 4)]
    with IsolatedEvaluator(tune_objectives.faulting, {"fault_on": 2}, timeout_s=30) as ev:
        result = tune(configs, ev, "brute", budget=len(configs))
        assert ev.restarts == 1
    status = {e.config["x"]: (e.status, e.value) for e in result.evaluations}
    assert status[2][0] == "failed" and "restarted" in next(e.error for e in result.evaluations if e.config["x"] == 2)
    assert status[3] == ("ok", 3.5) and status[4] == ("ok", 4.5)


KILLED_PARENT = """
import sys, time
sys.path.insert(0, {tests!r})
from simtlab.tune.worker import IsolatedEvaluator, Precompiler
pc = Precompiler("gemm", "tuned", "sm_90", workers=1)
pc._pool.submit(time.sleep, 0.01).result()  # (the worker process exists once it has run something)
import tune_objectives
ev = IsolatedEvaluator(tune_objectives.sleepy, {{"hang_on": 3}}, timeout_s=60)
ev({{"x": 1}})
print(" ".join(str(p) for p in list(pc._pool._processes) + [ev._proc.pid]), flush=True)
time.sleep(600)
"""


def test_killing_tune_leaves_no_process_behind(tmp_path):
    """SIGKILL of the tuning process (no chance to clean up): its compiling worker and its
    measuring child die with it (PR_SET_PDEATHSIG), instead of waiting on a pipe for minutes."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    code = KILLED_PARENT.format(tests=str(Path(__file__).parent))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        children = [int(p) for p in parent.stdout.readline().split()]
        assert len(children) == 2
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)

    def running(pid):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state not in ("Z", "X")

    deadline = time.monotonic() + 20
    while any(running(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(running(p) for p in children), [p for p in children if running(p)]
