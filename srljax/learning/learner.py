"""The learner core shared by ``srljax.loops.train`` and ``TrainerWorker``: state, jitted update, checkpoints.

    learner = Learner(cfg, spec)                 # builds the algorithm, inits the state from cfg.seed
    metrics = learner.step(batch)                # one jitted update on a Trajectory [T+1, B]
    metrics, per_sample = learner.step(replay_batch)   # a replay algorithm's ReplayBatch [N]: + priorities [N]
    metrics, per_sample = learner.steps(stacked)         # K updates in one compiled call on [K, N] batches: [K] ...
    params = learner.policy_params()             # what actors act with; version == learner.version
    learner.maybe_save()                         # orbax checkpoint if checkpoint.every_updates says so
    learner.run_state = lambda: (shell_arrays, meta)   # what the driving loop adds to every checkpoint
    shell, meta = learner.restore(like_shell)     # resume: state, version and the loop's own state

Both paths call exactly this, so they produce the same update on the same batch and seed.

Devices: the update runs data parallel over ``cfg.trainer.devices`` local devices of each of
``cfg.trainer.num_hosts`` processes (``srljax.parallel.sharding``): the batch is split on its env axis
B (a ``ReplayBatch`` on its sample axis N), the state is replicated, and the update is
compiled once for that layout on the first ``step``. With several hosts, every process of the
group builds a ``Learner`` after ``srljax.parallel.multihost.initialize`` and calls ``step`` with its
own B / num_hosts columns; all of them call ``save`` (orbax writes each array once); only
``is_primary`` should publish params.
To overlap the host-to-device copy of the next batch with the running update::

    placed = learner.put(next_batch)             # returns at once; the copy proceeds
    metrics = learner.step(placed)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import algos
from srljax.config import Experiment, to_dict
from srljax.parallel import sharding
from srljax.storage.checkpoint import Checkpointer
from srljax.types import EnvSpec, ReplayBatch, Trajectory


class Learner:
    def __init__(self, cfg: Experiment, spec: EnvSpec, checkpoints: bool = True, algo: algos.Algorithm | None = None):
        self.cfg = cfg
        self.algo = algo or algos.make(cfg, spec)  # ``algo``: built by the caller (one policy of several)
        self.mesh = sharding.make_mesh(cfg.trainer.devices, cfg.trainer.num_hosts)
        self._replicated = sharding.replicated(self.mesh)
        self.state = self.fresh_state(cfg.seed)
        self._batch_shardings: Trajectory | None = None
        self._update: Any = None  # compiled on the first step, for the first batch's shapes
        self._updates: Any = None  # ``steps``: K updates in one program, compiled on its first call
        self._stacked_shardings: Any = None  # its batches' layout: split on the sample axis (1)
        # Runs on this process's replica alone (no program every host must join), and copies, so
        # the params handed out survive the next update donating the state's buffers.
        self._policy_params = jax.jit(lambda state: jax.tree.map(jnp.copy, self.algo.policy_params(state)))
        self._sync = sharding.needs_sync(self.mesh)
        self.version = 0  # updates applied; also the params version actors see
        self.checkpointer = Checkpointer(cfg.run_dir / "checkpoints", keep=cfg.checkpoint.keep) if checkpoints else None
        # the driving loop's part of each checkpoint: () -> (numpy arrays, JSON meta); see ``save``
        self.run_state: Callable[[], tuple[dict[str, Any], dict[str, Any]]] | None = None

    def fresh_state(self, seed: int) -> Any:
        """A new train state, initialised as a ``Learner`` of seed ``seed`` starts (PSRO's graph trainer starts each
        best response so)."""
        init_key = jax.random.fold_in(jax.random.PRNGKey(seed), 0)
        # Every leaf comes out a global replicated array (optax's scalar count too), which a
        # multi-host orbax save requires; every process computes the same init from the seed.
        return jax.jit(self.algo.init, out_shardings=self._replicated)(init_key)

    @property
    def is_primary(self) -> bool:
        """True on the process that publishes params and logs (process 0 of the trainer group)."""
        return jax.process_index() == 0

    def put(self, batch: Trajectory) -> Trajectory:
        """Start copying this process's columns of ``batch`` to the devices; ``step`` accepts the result."""
        if self._batch_shardings is None:
            self._batch_shardings = (sharding.trajectory_sharding(self.mesh, batch) if isinstance(batch, Trajectory)
                                     else sharding.sample_sharding(self.mesh, batch))
        return sharding.put_batch(batch, self._batch_shardings)

    def compile(self, example: Trajectory) -> None:
        """Compile the update now for batches shaped like ``example`` (this process's columns), so the
        first ``step`` does not stall a running trial for the compile."""
        if self._update is None:
            self._update = self._compile(self.put(example))

    def step(self, batch: Trajectory | ReplayBatch) -> dict[str, Any] | tuple[dict[str, Any], dict[str, Any]]:
        """Dispatch one update on ``batch`` (host arrays or ``put``'s result) and return at once (on
        accelerators): the metrics stay on device until read, ``put`` of the next batch overlaps it.
        A replay algorithm's update also returns per-sample outputs: then ``(metrics, per_sample)``."""
        batch = self.put(batch)
        if self._update is None:
            self._update = self._compile(batch)
        self.state, metrics, *per_sample = self._update(self.state, batch)
        if self._sync:
            jax.block_until_ready(metrics)
        self.version += 1
        if per_sample:
            return sharding.host_local((metrics, per_sample[0]))
        return sharding.host_local(metrics)

    def steps(self, batches: ReplayBatch) -> tuple[dict[str, Any], dict[str, Any]]:
        """K updates of a replay algorithm in one compiled call (a ``lax.scan``) on ``batches`` stacked
        ``[K, N, ...]``; returns every update's metrics and per-sample outputs, stacked ``[K, ...]``.
        Same updates as K ``step`` calls on the same batches, without K dispatches."""
        k = int(jax.tree.leaves(batches)[0].shape[0])
        if self._updates is None:
            self._stacked_shardings = jax.tree.map(lambda _: sharding.batch_axis_sharding(self.mesh, 1), batches)
        shardings = self._stacked_shardings
        placed = sharding.put_batch(batches, shardings)
        if self._updates is None:
            def scanned(state: Any, stacked: Any) -> Any:
                def body(carry: Any, batch: Any) -> Any:
                    carry, metrics, per_sample = self.algo.update(carry, batch)
                    return carry, (metrics, per_sample)

                return jax.lax.scan(body, state, stacked)

            update = jax.jit(scanned, in_shardings=(self._replicated, shardings), out_shardings=self._replicated,
                             donate_argnums=0)
            with jax.set_mesh(self.mesh):
                self._updates = update.lower(self.state, placed).compile()
        self.state, (metrics, per_sample) = self._updates(self.state, placed)
        if self._sync:
            jax.block_until_ready(metrics)
        self.version += k
        return sharding.host_local((metrics, per_sample))

    def maybe_save(self, since: int | None = None) -> None:
        """Checkpoint if ``checkpoint.every_updates`` says this version is due (or, after several updates
        at once, ``since`` the version before them, one fell due among them). Shells call it after
        logging the updates' metrics, so a resumed run's ``metrics.jsonl`` has no gap."""
        if self.checkpointer is not None:
            self.checkpointer.check()  # the last save's background write failed (a full disk): stop here
        every = self.cfg.checkpoint.every_updates
        previous = self.version - 1 if since is None else since
        if every and self.version // every > previous // every:
            self.save()

    def _compile(self, batch: Trajectory) -> Any:
        update = jax.jit(
            self.algo.update,
            in_shardings=(self._replicated, self._batch_shardings),
            out_shardings=self._replicated,  # state, metrics (and a replay update's per-sample outputs)
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
        """Checkpoint the run at ``version``: the train state, plus ``run_state()``'s arrays and meta
        (counters, keys, rows in flight), the config and its digest (``srljax.storage.run_dir``)."""
        # A periodic save may already have written this step (e.g. the final one).
        if self.checkpointer is None or not self.version or self.checkpointer.latest_step() == self.version:
            return
        from srljax.storage.run_dir import config_digest

        shell, meta = self.run_state() if self.run_state is not None else ({}, {})
        meta = {"version": self.version, "config": to_dict(self.cfg), "config_digest": config_digest(self.cfg), **meta}
        self.checkpointer.save(self.version, self.state, shell=shell, meta=meta)

    def restore(self, like_shell: dict[str, Any] | None = None,
                step: int | None = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Continue from the newest (or ``step``'s) checkpoint: the train state and ``version`` come
        back here; returns the driving loop's arrays (shaped like ``like_shell``) and the meta."""
        if self.checkpointer is None:
            raise RuntimeError("this Learner was made with checkpoints=False")
        state, shell, meta = self.checkpointer.restore_run(self.state, like_shell, step)
        self.state = jax.device_put(state, self._replicated)
        self.version = int(meta.get("version", meta.get("step", 0)))
        if getattr(self.checkpointer, "skipped", None) and self.is_primary:  # fell back past a damaged step
            from pathlib import Path

            from srljax.storage.run_dir import rollback_metrics

            for note in rollback_metrics(Path(self.cfg.run_dir) / "metrics.jsonl", self.version, report=True):
                print(f"resume: {note}", flush=True)
        return shell, meta

    def close(self, final_checkpoint: bool | None = None) -> None:
        if self.checkpointer is None:
            return
        if (self.cfg.checkpoint.final if final_checkpoint is None else final_checkpoint) \
                and not self.checkpointer.failed:  # after a failed save (a full disk) no final one is tried
            try:
                self.save()
            except BaseException:
                self.checkpointer.failed = True
                self.checkpointer.close()
                self.checkpointer = None
                raise
        self.checkpointer.close()
        self.checkpointer = None
