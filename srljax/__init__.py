"""srljax: SRL-style distributed reinforcement learning on JAX, envpool and ZeroMQ.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment())
"""

from srljax.train import TrainResult, train

__all__ = ["TrainResult", "train"]
