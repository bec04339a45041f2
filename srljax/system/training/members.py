"""A member's publisher: the trainer of one member of a distributed PBT population (``pbt.population`` > 1) or
of a league (``selfplay.league``, whose members never wait at ready points: no ready points, no directives).

    python -m launch.local configs/cartpole_pbt_distributed.py     # trainer i trains member i
    python -m launch.local configs/connect_four_league.py          # trainer i trains league member i

Trainer ``i`` of the layout trains member ``i`` (``learners.MemberLearner``: ``member_experiment``, seed
``seed + i``, run folder ``RUN_DIR/members/<i>/`` for ``metrics.jsonl`` and ``checkpoints/``, a checkpoint every
``pbt.ready_updates`` updates), starting at learning rate ``pbt.member_lr[i]`` (a factor in the optimiser state,
``srljax.loops.population.with_lr_scale``: no recompile). It binds its own samples and params sockets like a
policy's trainer (its actors, ``layout.num_actors / population`` of them, push only to it and follow only it)
and a third, ``directives`` (PULL), on which the population manager speaks.

At every ready point (its version reaching ``r x pbt.ready_updates``, before its last update) it starts
no further update (``may_update``) until the manager's directive for point ``r`` comes: carry on, or
copy member j and train with learning rate x. It keeps receiving samples and republishing meanwhile.

A copy: restore member j's newest complete checkpoint (orbax renames a step's folder only once it is
whole; read-only, nothing of j's is written or deleted), give it a fresh rng and the new learning rate,
and count the copy as a new params version of its own (``version + 1``: followers take only higher
versions, so the copied params reach its actors and the manager at once; a member that copied c times
trains ``num_updates - c`` updates). The new state is checkpointed in its own folder at once (meta
``copied_from``, ``source_step``). Samples in flight, acted with the old params, are trained on as usual
(PPO's clipped ratio bounds them; dropping them would starve the actors' lag throttle, whose grants
count pushed columns). A directive that names another member, an old ready point, or comes after the
member finished is counted and ignored (``directives_*`` in its worker metrics; one that does not decode
is counted by the receiver, ``directives/drop.directive``); a checkpoint that cannot be read is counted
(``copies_failed``) and the member carries on.

The trial ends as for several policies (``PolicyPublisher``'s done keys): a member that trained its updates adds
its ``done`` key and keeps draining samples and republishing; trainer 0 tells the controller ``done`` once every
member's key is there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from srljax.comm.directives import Directive, DirectiveReceiver
from srljax.config.pbt import member_dir, member_lr
from srljax.layout import DIRECTIVES
from srljax.population.pbt import lr_scale, with_lr_scale
from srljax.system.shell.common import bind_address
from srljax.system.shell.worker import Worker
from srljax.system.training.publishers import HoldsDirectives, PolicyPublisher


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


class MemberPublisher(HoldsDirectives, PolicyPublisher):
    """``trainers``: the members; ``league``: a league's (no ready points); ``pbt``: a PBT population's."""

    def __init__(self, worker: Worker, trainers: int, league: bool, pbt: bool) -> None:
        super().__init__(worker, f"member {worker.index}", trainers, league=league)
        self.pbt = pbt
        self.base_lr = float(worker.experiment.trainer.lr)
        self.ready_every = 0  # updates between ready points (from ``start``): ``pbt.ready_updates``, none in a league
        self.next_ready = 0  # the ready point it waits at next
        self.copied: dict[str, Any] = {}  # the last copy (in checkpoint meta)
        self.directives: DirectiveReceiver | None = None

    @property
    def lr_factor(self) -> float:
        """The member's learning-rate factor (PBT's, in the optimiser state); 1 in a league."""
        return lr_scale(self.worker.learner.state) if self.pbt else 1.0

    @property
    def lr(self) -> float:
        return self.base_lr * self.lr_factor

    def start(self) -> None:
        w = self.worker
        learner = w.learner
        if not w.resume and self.pbt:  # a resumed member's rate is in its checkpoint
            scale = member_lr(w.experiment, w.index) / self.base_lr
            learner.state = jax.device_put(with_lr_scale(learner.state, scale), learner._replicated)
        self.ready_every = ready = w.experiment.pbt.ready_updates if self.pbt else 0
        # the ready point it waits at next (a restarted member restored at a ready point does not wait there again)
        self.next_ready = learner.version // ready + 1 if ready else 0
        self.directives = DirectiveReceiver(bind_address(w.cfg), w.trial, self.trainers, ctx=w.ctx)
        w.register(DIRECTIVES, self.directives.address)
        w.log(f"member {w.index}: lr {self.lr:.3g}, seed {w.cfg.seed}, run folder {w.cfg.run_dir}; "
              f"directives at {self.directives.address}")

    def at_ready(self) -> bool:
        """At a ready point (``pbt.ready_updates`` apart, before the last update): wait for the manager's word."""
        ready = self.ready_every
        point = self.next_ready * ready
        return bool(ready) and point < self.worker.cfg.num_updates and self.worker.learner.version >= point

    def may_update(self) -> bool:
        return not self.at_ready()

    def waiting(self) -> str:
        if self.worker.running is None and self.at_ready():
            return f"the population manager's directive for ready point {self.next_ready}"
        return ""

    def poll(self) -> None:
        while (directive := self.directives.recv(timeout_ms=0)) is not None:
            self.apply(directive)

    def apply(self, directive: Directive) -> bool:
        """Carry out one directive (see the module docstring); True if the member copied."""
        w = self.worker
        if directive.copier != w.index:
            w.stats.add("directives_wrong_member")
            return False
        if self.trained or w.learner.version >= w.cfg.num_updates:
            w.stats.add("directives_after_done")
            return False
        if directive.ready != self.next_ready:  # e.g. a restarted manager deciding again what was decided
            w.stats.add("directives_stale")
            return False
        self.next_ready += 1
        if directive.source < 0:
            w.stats.add("directives_carry_on")
            return False
        if w.running is not None:  # the update in flight ends first (its ring is taken, so none is left over)
            jax.block_until_ready(w.running)
            while not w.update_end.ended():
                time.sleep(0.001)
            w.finish_update()
        source_dir = member_dir(w.experiment, directive.source) / "checkpoints"
        started = time.monotonic()
        try:
            step, state = restore_member_state(source_dir, w.learner.state)
        except Exception as error:  # noqa: BLE001 - a copy that fails leaves the member as it was
            w.stats.add("copies_failed")
            w.log(f"copy of member {directive.source} failed ({type(error).__name__}: {error}); training on")
            return False
        old_lr, version = self.lr, w.learner.version + 1
        state = state.replace(rng=jax.random.fold_in(state.rng, 1000 * version + w.index))
        w.learner.state = jax.device_put(with_lr_scale(state, directive.lr / self.base_lr), w.learner._replicated)
        w.learner.version = version
        self.copied = {"copied_from": directive.source, "source_step": step, "ready": directive.ready,
                       "lr_before": old_lr, "lr": directive.lr}
        self.publish()
        w.learner.save()
        w.stats.add("copies")
        w.stats.sample("time/copy_s", time.monotonic() - started)
        w.log(f"ready point {directive.ready}: copied member {directive.source}'s checkpoint step {step} "
              f"(evaluated at version {directive.source_version}); lr {old_lr:.3g} -> {directive.lr:.3g}; "
              f"now version {version}; "
              f"{time.monotonic() - started:.2f} s")
        return True

    def train_metrics(self, train_metrics: dict[str, Any]) -> dict[str, Any]:
        # the algorithm reports its (annealed) base rate; the member's is that times its factor
        lr = float(np.asarray(train_metrics.get("lr", self.base_lr))) * self.lr_factor
        return {**train_metrics, "lr": lr}

    def state(self) -> dict[str, Any]:
        return {"member": self.worker.index, "lr": self.lr, **self.copied}
