"""Objectives the isolation tests run in a child process (pytest puts this folder on sys.path,
which a spawned child inherits)."""

import os
import time


def sleepy(hang_on: int = 3, die_on: int | None = None):
    def objective(config):
        if config["x"] == hang_on:
            time.sleep(3600)  # a kernel that never finishes
        if config["x"] == die_on:
            os._exit(7)  # a process that dies (e.g. a driver abort)
        if config["x"] < 0:
            raise ValueError("negative x is rejected")
        return float(config["x"]) + 0.5

    return objective


def broken():
    raise RuntimeError("no GPU here")


def which_gpu(delay: float = 0.05):
    """Reports the GPU list its process was given, so a test can see where each config ran."""
    def objective(config):
        time.sleep(delay)
        return float(config["x"]) * 10 + int(os.environ.get("CUDA_VISIBLE_DEVICES", "-1")) / 100

    return objective


def faulting(fault_on: int = 2):
    """After x == fault_on every later call in this process fails, as a CUDA context does after an
    illegal address; a fresh process measures again."""
    state = {"lost": False}

    def objective(config):
        if state["lost"] or config["x"] == fault_on:
            state["lost"] = True
            raise RuntimeError("CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered")
        return float(config["x"]) + 0.5

    return objective
