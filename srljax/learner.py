"""The learner core shared by ``srljax.train`` and ``TrainerWorker``: state, jitted update, checkpoints.

    learner = Learner(cfg, spec)                 # builds the algorithm, inits the state from cfg.seed
    metrics = learner.step(batch)                # one jitted update on a Trajectory [T+1, B]
    params = learner.policy_params()             # what actors act with; version == learner.version
    learner.save()                               # orbax checkpoint at the current update count

Both paths call exactly this, so they produce the same update on the same batch and seed.
"""

from __future__ import annotations

from typing import Any

import jax

import algos
from srljax.checkpoint import Checkpointer
from srljax.config import Experiment
from srljax.types import EnvSpec, Trajectory


class Learner:
    def __init__(self, cfg: Experiment, spec: EnvSpec, checkpoints: bool = True):
        self.cfg = cfg
        self.algo = algos.make(cfg, spec)
        init_key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 0)
        self.state = self.algo.init(init_key)
        self._update = jax.jit(self.algo.update, donate_argnums=0)
        self._policy_params = jax.jit(self.algo.policy_params)
        self.version = 0  # updates applied; also the params version actors see
        self.checkpointer = Checkpointer(cfg.run_dir / "checkpoints", keep=cfg.checkpoint.keep) if checkpoints else None

    def step(self, batch: Trajectory) -> dict[str, float]:
        self.state, metrics = self._update(self.state, batch)
        self.version += 1
        every = self.cfg.checkpoint.every_updates
        if every and self.version % every == 0:
            self.save()
        return metrics

    def policy_params(self) -> Any:
        return self._policy_params(self.state)

    def save(self) -> None:
        if self.checkpointer is not None and self.version:
            self.checkpointer.save(self.version, self.state)

    def close(self, final_checkpoint: bool | None = None) -> None:
        if self.checkpointer is None:
            return
        if self.cfg.checkpoint.final if final_checkpoint is None else final_checkpoint:
            self.save()
        self.checkpointer.close()
        self.checkpointer = None
