"""srljax: SRL-style distributed reinforcement learning on JAX, envpool and ZeroMQ.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment())

Names are loaded on first use: a worker process that imports ``srljax.system.acting.actor`` loads only what
an actor needs (no orbax, wandb or matplotlib).
"""

from __future__ import annotations

from srljax.objects import lazy_exports

_EXPORTS = {"train": "srljax.loops.train", "TrainResult": "srljax.loops.result"}

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = sorted(_EXPORTS)
