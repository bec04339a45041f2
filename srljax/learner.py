"""The learner core shared by ``srljax.train`` and ``TrainerWorker``: state, jitted update, checkpoints.

    learner = Learner(cfg, spec)                 # builds the algorithm, inits the state from cfg.seed
    metrics = learner.step(batch)                # one jitted update on a Trajectory [T+1, B]
    params = learner.policy_params()             # what actors act with; version == learner.version
    learner.save()                               # orbax checkpoint at the current update count

Both paths call exactly this, so they produce the same update on the same batch and seed.

Devices: the update runs data parallel over ``cfg.trainer.devices`` local devices of each of
``cfg.trainer.num_hosts`` processes (``srljax.sharding``): the batch is split on its env axis
B, the state is replicated, and the update is compiled once for that layout on the first
``step``. With several hosts, every process of the group builds a ``Learner`` after
``srljax.distributed.initialize`` and calls ``step`` with its own B / num_hosts columns; all of
them call ``save`` (orbax writes each array once); only ``is_primary`` should publish params.
To overlap the host-to-device copy of the next batch with the running update::

    placed = learner.put(next_batch)             # returns at once; the copy proceeds
    metrics = learner.step(placed)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

import algos
from srljax import sharding
from srljax.checkpoint import Checkpointer
from srljax.config import Experiment
from srljax.types import EnvSpec, Trajectory


class Learner:
    def __init__(self, cfg: Experiment, spec: EnvSpec, checkpoints: bool = True):
        self.cfg = cfg
        self.algo = algos.make(cfg, spec)
        self.mesh = sharding.make_mesh(cfg.trainer.devices, cfg.trainer.num_hosts)
        self._replicated = sharding.replicated(self.mesh)
        init_key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 0)
        # Every leaf comes out a global replicated array (optax's scalar count too), which a
        # multi-host orbax save requires; every process computes the same init from the seed.
        self.state = jax.jit(self.algo.init, out_shardings=self._replicated)(init_key)
        self._batch_shardings: Trajectory | None = None
        self._update: Any = None  # compiled on the first step, for the first batch's shapes
        # Runs on this process's replica alone (no program every host must join), and copies, so
        # the params handed out survive the next update donating the state's buffers.
        self._policy_params = jax.jit(lambda state: jax.tree.map(jnp.copy, self.algo.policy_params(state)))
        self._sync = sharding.needs_sync(self.mesh)
        self.version = 0  # updates applied; also the params version actors see
        self.checkpointer = Checkpointer(cfg.run_dir / "checkpoints", keep=cfg.checkpoint.keep) if checkpoints else None

    @property
    def is_primary(self) -> bool:
        """True on the process that publishes params and logs (process 0 of the trainer group)."""
        return jax.process_index() == 0

    def put(self, batch: Trajectory) -> Trajectory:
        """Start copying this process's columns of ``batch`` to the devices; ``step`` accepts the result."""
        if self._batch_shardings is None:
            self._batch_shardings = sharding.trajectory_sharding(self.mesh, batch)
        return sharding.put_batch(batch, self._batch_shardings)

    def compile(self, example: Trajectory) -> None:
        """Compile the update now for batches shaped like ``example`` (this process's columns), so the
        first ``step`` does not stall a running trial for the compile."""
        if self._update is None:
            self._update = self._compile(self.put(example))

    def step(self, batch: Trajectory) -> dict[str, Any]:
        """Dispatch one update on ``batch`` (host arrays or ``put``'s result) and return at once (on
        accelerators): the metrics stay on device until read, ``put`` of the next batch overlaps it."""
        batch = self.put(batch)
        if self._update is None:
            self._update = self._compile(batch)
        self.state, metrics = self._update(self.state, batch)
        if self._sync:
            jax.block_until_ready(metrics)
        self.version += 1
        every = self.cfg.checkpoint.every_updates
        if every and self.version % every == 0:
            self.save()
        return sharding.host_local(metrics)

    def _compile(self, batch: Trajectory) -> Any:
        update = jax.jit(
            self.algo.update,
            in_shardings=(self._replicated, self._batch_shardings),
            out_shardings=(self._replicated, self._replicated),
            donate_argnums=0,
        )
        # The mesh as context lets sharding.split_samples inside the algorithm see it while
        # tracing. Compiling ahead of time pins that one program: a batch of another shape or
        # layout is an error rather than a silent retrace without the constraints.
        with jax.set_mesh(self.mesh):
            return update.lower(self.state, batch).compile()

    def policy_params(self) -> Any:
        """Params for actors, on this process's first trainer device (readable with ``jax.device_get``)."""
        return self._policy_params(sharding.host_local(self.state))

    def save(self) -> None:
        # A periodic save may already have written this step (e.g. the final one).
        if self.checkpointer is not None and self.version and self.checkpointer.latest_step() != self.version:
            self.checkpointer.save(self.version, self.state)

    def close(self, final_checkpoint: bool | None = None) -> None:
        if self.checkpointer is None:
            return
        if self.cfg.checkpoint.final if final_checkpoint is None else final_checkpoint:
            self.save()
        self.checkpointer.close()
        self.checkpointer = None
