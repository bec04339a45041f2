"""srljax: SRL-style distributed reinforcement learning on JAX, envpool and ZeroMQ.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment())

Names are loaded on first use: a worker process that imports ``srljax.system.actor`` loads only what
an actor needs (no orbax, wandb or matplotlib).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"train": "srljax.loops.train", "TrainResult": "srljax.loops.result"}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'srljax' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = sorted(_EXPORTS)
