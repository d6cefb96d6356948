"""Autotuning: constrained parameter spaces, search strategies, persistent history."""

from ..space import Space
from .strategies import STRATEGIES, make_strategy
from .tuner import Evaluation, TuneResult, tune

__all__ = ["Space", "STRATEGIES", "make_strategy", "Evaluation", "TuneResult", "tune"]
