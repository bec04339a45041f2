"""CartPole PPO as a worker graph plus a user-defined worker role: a params-norm logger.

    python -m launch.local configs/cartpole_ppo_params_norm.py     # writes runs/<exp>/<trial>/params_norms.jsonl
    python -m launch.slurm configs/cartpole_ppo_params_norm.py -f try1

A new role, as SRL allows: a ``Worker`` subclass with a ``role`` name, defined outside
``srljax/`` (here, next to the config that uses it) and named in ``layout.custom_roles``
(``"module:Class"``, ``"module:Class*N"`` for N workers). Every backend runs it like a built-in
role: a thread in ``run_threads``, a process in ``launch.local``, a Slurm task in ``launch.slurm``
(resources in ``slurm.custom``). It is configured after the built-in roles, so ``peers_of`` finds
every address they serve, and the configure message carries the env spec.

This one subscribes to the trainer's params stream and writes the global L2 norm of every
version it receives: a cheap way to watch a run diverge without touching the trainer.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from configs import cartpole_ppo_distributed
from srljax.config import Experiment, Promise
from srljax.system.shell.worker import Worker


class ParamsNormLogger(Worker):
    role = "params_norm"
    placement = "cpu"

    def setup(self) -> None:
        import algos
        from srljax.layout import PARAMS, TRAINER
        from srljax.system.training.params import ParamsCodec, ParamsFollower

        codec = ParamsCodec(algos.make(self.cfg, self.spec))
        self.follower = ParamsFollower(self.trial, self.peers_of(TRAINER, PARAMS), codec, self.stats, self.ctx)
        self.out = (Path(self.cfg.run_dir) / "params_norms.jsonl").open("a")

    def poll(self) -> None:
        if self.follower.poll(timeout_ms=50):
            leaves = [np.asarray(x, np.float64) for x in _leaves(self.follower.params)]
            norm = float(np.sqrt(sum(float((x * x).sum()) for x in leaves)))
            self.out.write(json.dumps({"version": self.follower.version, "norm": norm}) + "\n")
            self.out.flush()
            self.stats.add("versions")

    def progress(self) -> int:
        return max(0, getattr(getattr(self, "follower", None), "version", 0))

    def close(self) -> None:
        for thing in (getattr(self, "follower", None), getattr(self, "out", None)):
            if thing is not None:
                thing.close()


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree.leaves(tree)

PROMISE = Promise(
    "best_return", median=475, worst=400, wall_s=95, quick=False,
    source="the gate at 9cfbcd3+changes on this 2-core box: final 500.0 / 500.0 / ... (asynchronous: the best "
    "3-line window is judged), 87-95 s",
)


def experiment() -> Experiment:
    base = cartpole_ppo_distributed.experiment()
    return dataclasses.replace(
        base,
        name="cartpole_ppo_params_norm",
        layout=dataclasses.replace(base.layout, custom_roles=("configs.cartpole_ppo_params_norm:ParamsNormLogger",)),
    )
