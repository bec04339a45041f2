"""Algorithms: ``make(cfg, spec) -> Algorithm`` (see ``algos.base`` for the seam)."""

from __future__ import annotations

from algos.base import Algorithm, TrainState
from algos.ppo import make_ppo
from srljax.config import Experiment, PPOConfig
from srljax.types import EnvSpec

__all__ = ["Algorithm", "TrainState", "make"]


def make(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build the configured algorithm for environments described by ``spec``."""
    match cfg.algo:
        case PPOConfig():
            return make_ppo(cfg, spec)
        case other:
            raise ValueError(f"unknown algorithm config {type(other).__name__}; known: PPOConfig")
