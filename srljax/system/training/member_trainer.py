"""MemberTrainerWorker: the trainer of one member of a distributed PBT population (``pbt.population`` > 1) or
of a league (``selfplay.league``, whose members never wait at ready points: no ready points, no directives).

    python -m launch.local configs/cartpole_pbt_distributed.py     # trainer i trains member i
    python -m launch.local configs/connect_four_league.py          # trainer i trains league member i

Trainer ``i`` trains member ``i`` (``member_experiment``: seed ``seed + i``, run folder ``RUN_DIR/members/<i>/``),
its learning rate a factor in the optimiser state (``srljax.population.pbt.with_lr_scale``: no recompile). It
binds its own samples and params sockets like a policy's trainer, and a ``directives`` PULL socket on which the
population manager speaks. At every ready point it starts no further update (``may_update``) until the
directive comes: carry on, or copy member j (its newest complete checkpoint, read-only) and train at rate x;
a copy counts as a new params version of its own. Bad or stale directives and unreadable checkpoints are
counted and ignored. The trial ends as for several policies (``PolicyTrainerWorker``'s done keys).
``docs/architecture.md``, "Distributed population".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from srljax.comm import NameNotFound
from srljax.config.pbt import member_count
from srljax.config.selfplay import league_members
from srljax.layout import DIRECTIVES, LEAGUE
from srljax.learning.learner import Learner
from srljax.population.pbt import lr_scale, with_lr_scale
from srljax.system.shell.common import bind_address, stream_key
from srljax.system.managers.pbt_directives import (
    Directive,
    DirectiveReceiver,
    member_dir,
    member_experiment,
    member_lr,
)
from srljax.system.training.policy_trainer import DONE, PolicyTrainerWorker
from srljax.system.training.trainer import TrainerWorker


def restore_member_state(directory: Path, like: Any, step: int | None = None) -> tuple[int, Any]:
    """(step, train state) of the newest (or ``step``'s) complete checkpoint in ``directory``, read-only:
    no checkpoint manager is opened on another member's folder, so nothing there is pruned or cleaned."""
    import orbax.checkpoint as ocp

    from srljax.storage.checkpoint import STATE, CheckpointError, _abstract
    from srljax.storage.steps import steps

    found = steps(directory)
    if not found:
        raise CheckpointError(f"no complete checkpoint in {directory}")
    step = found[-1] if step is None else step
    reader = ocp.StandardCheckpointer()
    try:
        state = reader.restore(Path(directory).absolute() / str(step) / STATE, _abstract(like))
    finally:
        reader.close()
    return step, state


class MemberTrainerWorker(PolicyTrainerWorker):
    serves = (*TrainerWorker.serves, DIRECTIVES)

    def setup(self) -> None:
        self.experiment = self.cfg  # the whole experiment (names keys, the other members' folders)
        self.env_spec = self.spec
        self.policy = f"member {self.index}"  # PolicyTrainerWorker's log lines name it
        self.cfg = member_experiment(self.experiment, self.index)
        self.names.delete(self._done_key(self.index))
        self.finished = False
        self.next_done_check = 0.0
        self.copied: dict[str, Any] = {}  # the last copy (in checkpoint meta)
        self.base_lr = float(self.experiment.trainer.lr)
        TrainerWorker.setup(self)
        self.done_sent = True  # TrainerWorker's own ``done`` would end the trial when the first member is done
        self.trial_done_sent = False
        if not self.resume and self.experiment.pbt.enabled:  # a resumed member's rate is in its checkpoint
            scale = member_lr(self.experiment, self.index) / self.base_lr
            self.learner.state = jax.device_put(with_lr_scale(self.learner.state, scale), self.learner._replicated)
        ready = self.ready_every
        # the ready point it waits at next (a restarted member restored at a ready point does not wait there again)
        self.next_ready = self.learner.version // ready + 1 if ready else 0
        self.directives = DirectiveReceiver(bind_address(self.cfg), self.trial, member_count(self.experiment),
                                            ctx=self.ctx)
        self.register(DIRECTIVES, self.directives.address)
        self.log(f"member {self.index}: lr {self.lr:.3g}, seed {self.cfg.seed}, run folder {self.cfg.run_dir}; "
                 f"directives at {self.directives.address}")

    @property
    def ready_every(self) -> int:
        """Updates between ready points: ``pbt.ready_updates`` in a PBT population, none in a league."""
        return self.experiment.pbt.ready_updates if self.experiment.pbt.enabled else 0

    @property
    def lr_factor(self) -> float:
        """The member's learning-rate factor (PBT's, in the optimiser state); 1 in a league."""
        return lr_scale(self.learner.state) if self.experiment.pbt.enabled else 1.0

    @property
    def lr(self) -> float:
        return self.base_lr * self.lr_factor

    def at_ready(self) -> bool:
        """At a ready point (``pbt.ready_updates`` apart, before the last update): wait for the manager's word."""
        ready = self.ready_every
        point = self.next_ready * ready
        return bool(ready) and point < self.cfg.num_updates and self.learner.version >= point

    def may_update(self) -> bool:
        return not self.at_ready()

    def waiting(self) -> str:
        if getattr(self, "learner", None) is not None and self.running is None and self.at_ready():
            return f"the population manager's directive for ready point {self.next_ready}"
        return super().waiting()

    def make_learner(self) -> Learner:
        return Learner(self.cfg, self.spec)

    def ready_info(self) -> dict[str, Any]:
        return TrainerWorker.ready_info(self)

    def trainers_in_trial(self) -> int:
        return member_count(self.experiment)

    def trial_complete(self) -> bool:
        """A league's trial also waits for its manager's ``done`` key (its last bot evaluations written)."""
        if not super().trial_complete():
            return False
        if not league_members(self.experiment):
            return True
        try:
            self.names.get(stream_key(self.experiment, LEAGUE, 0, DONE))
        except NameNotFound:
            return False
        return True

    def _take(self, msg: Any) -> None:
        TrainerWorker._take(self, msg)

    def poll(self) -> None:
        while (directive := self.directives.recv(timeout_ms=0)) is not None:
            self.apply(directive)
        super().poll()

    def apply(self, directive: Directive) -> bool:
        """Carry out one directive (see the module docstring); True if the member copied."""
        if directive.copier != self.index:
            self.stats.add("directives_wrong_member")
            return False
        if self.finished or self.learner.version >= self.cfg.num_updates:
            self.stats.add("directives_after_done")
            return False
        if directive.ready != self.next_ready:  # e.g. a restarted manager deciding again what was decided
            self.stats.add("directives_stale")
            return False
        self.next_ready += 1
        if directive.source < 0:
            self.stats.add("directives_carry_on")
            return False
        if self.running is not None:  # the update in flight ends first (its ring is taken, so none is left over)
            jax.block_until_ready(self.running)
            while not self.update_end.ended():
                time.sleep(0.001)
            self._finish_update()
        source_dir = member_dir(self.experiment, directive.source) / "checkpoints"
        started = time.monotonic()
        try:
            step, state = restore_member_state(source_dir, self.learner.state)
        except Exception as error:  # noqa: BLE001 - a copy that fails leaves the member as it was
            self.stats.add("copies_failed")
            self.log(f"copy of member {directive.source} failed ({type(error).__name__}: {error}); training on")
            return False
        old_lr, version = self.lr, self.learner.version + 1
        state = state.replace(rng=jax.random.fold_in(state.rng, 1000 * version + self.index))
        self.learner.state = jax.device_put(with_lr_scale(state, directive.lr / self.base_lr), self.learner._replicated)
        self.learner.version = version
        self.copied = {"copied_from": directive.source, "source_step": step, "ready": directive.ready,
                       "lr_before": old_lr, "lr": directive.lr}
        self._publish()
        self.learner.save()
        self.stats.add("copies")
        self.stats.sample("time/copy_s", time.monotonic() - started)
        self.log(f"ready point {directive.ready}: copied member {directive.source}'s checkpoint step {step} "
                 f"(evaluated at version {directive.source_version}); lr {old_lr:.3g} -> {directive.lr:.3g}; "
                 f"now version {version}; "
                 f"{time.monotonic() - started:.2f} s")
        return True

    def _log_metrics(self, train_metrics: dict[str, Any]) -> None:
        # the algorithm reports its (annealed) base rate; the member's is that times its factor
        lr = float(np.asarray(train_metrics.get("lr", self.base_lr))) * self.lr_factor
        super()._log_metrics({**train_metrics, "lr": lr})

    def _run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        shell, meta = super()._run_state()
        return shell, {**meta, "member": self.index, "lr": self.lr, **self.copied}

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        if getattr(self, "directives", None) is not None:
            out.update({f"directives/{k}": v for k, v in self.directives.counters().items()})
        return out

    def close(self) -> None:
        try:
            super().close()
        finally:
            if getattr(self, "directives", None) is not None:
                self.directives.close()
