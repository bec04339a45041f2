"""PSRO's trainer in the worker graph: one trainer trains every best response in turn, from a fresh network each.

    python -m launch.local configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2

Chosen by ``parts.trainer_parts`` when the plan says ``psro``. ``PSROLearning``: the learner is one best response's
(``srljax.population.psro.br_config``: ``total_env_steps / psro.iterations`` env steps, the learning rate annealed
over its updates ``U``, as in the single-process loop), while the trainer runs ``GraphSchedule.last`` versions:
best response ``k`` is versions ``k (U + 1)`` (its fresh network) to ``k (U + 1) + U``.

``PSROPublisher``: when best response ``k`` has trained its ``U`` updates the trainer starts no further update
(``may_update``) and waits for the population manager (``srljax/system/managers/psro_manager.py``), which follows
its params, freezes them into the population, solves the meta-game, writes the actors' opponents
(``psro/table.json``) and then sends a directive for ready point ``k + 1`` on the ``directives`` stream
(``srljax/comm/directives.py``: ``source=-1``, the PBT stream's "no copy"). On it the trainer drops the batch it
holds, starts the next best response from a fresh train state (seed ``seed + k + 1``, as the single-process loop's
``Learner`` of that seed) as version ``(k + 1)(U + 1)``, publishes it at once, and from then on drops every sample
acted with an older version (``SegmentSource.floor``). A directive for another ready point, or when it is not
waiting, is counted (``directives_stale``) and ignored. After the last best response it waits for the manager's
``done`` key (the last ``psro.jsonl`` line written) before it tells the controller ``done``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import jax

from srljax.comm import NameNotFound
from srljax.layout import DIRECTIVES, POPULATION, TRAINER
from srljax.learning.learner import Learner
from srljax.population.psro import NO_RESTART, GraphSchedule, br_config
from srljax.system.shell.common import bind_address, stream_key
from srljax.system.shell.worker import Worker
from srljax.system.training.learners import RunLearning
from srljax.system.training.publishers import DONE, DONE_CHECK_S, HoldsDirectives, Publisher

if TYPE_CHECKING:
    from srljax.config import Experiment
    from srljax.types import EnvSpec


class PSROLearning(RunLearning):
    def __init__(self) -> None:
        self.experiment: Any = None

    def scope(self, worker: Worker, experiment: Experiment, spec: EnvSpec) -> tuple[Experiment, EnvSpec]:
        """The trainer runs every best response's updates and the fresh starts between them."""
        import dataclasses

        self.experiment = experiment
        last = GraphSchedule.of(experiment).last
        return dataclasses.replace(experiment, total_env_steps=last * experiment.env_steps_per_update), spec

    def make(self, cfg: Experiment, spec: EnvSpec) -> Learner:
        return Learner(br_config(self.experiment), spec)  # one best response's updates and learning-rate schedule


def manager_done_key(experiment: Any) -> str:
    return stream_key(experiment, POPULATION, 0, DONE)


class PSROPublisher(HoldsDirectives, Publisher):
    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.schedule: GraphSchedule | None = None
        self.next = 1  # the best response it starts next (the ready point it waits at)
        self.directives: Any = None  # a DirectiveReceiver
        self.next_done_check = 0.0
        self.done_seen = False

    def start(self) -> None:
        from srljax.comm.directives import DirectiveReceiver

        w = self.worker
        if w.restarted:
            raise RuntimeError(NO_RESTART.format(who=TRAINER))
        self.schedule = GraphSchedule.of(w.experiment)
        self.directives = DirectiveReceiver(bind_address(w.cfg), w.trial, 1, ctx=w.ctx)
        w.register(DIRECTIVES, self.directives.address)
        w.log(f"psro: {self.schedule.iterations} best responses of {self.schedule.updates} updates each, versions "
              f"0..{self.schedule.last}; directives at {self.directives.address}")

    def at_ready(self) -> bool:
        """Best response ``next - 1`` has trained its updates and the next one is due: wait for the manager."""
        k, s = self.next, self.schedule
        return s is not None and k < s.iterations and self.worker.learner.version >= s.end(k - 1)

    def may_update(self) -> bool:
        return not self.at_ready()

    def waiting(self) -> str:
        w = self.worker
        if w.running is None and self.at_ready():
            return f"the population manager's word to start best response {self.next}"
        if w.learner is not None and w.learner.version >= w.cfg.num_updates and not self.done_seen:
            return "the population manager's last psro.jsonl line (its done key)"
        return ""

    def poll(self) -> None:
        while (directive := self.directives.recv(timeout_ms=0)) is not None:
            self.apply(directive)

    def apply(self, directive: Any) -> bool:
        """Start best response ``directive.ready`` from a fresh network (see the module docstring)."""
        w, s = self.worker, self.schedule
        if directive.ready != self.next or not self.at_ready():
            w.stats.add("directives_stale")
            return False
        if w.running is not None:  # the update in flight (best response next-1's last) ends first
            jax.block_until_ready(w.running)
            while not w.update_end.ended():
                time.sleep(0.001)
            w.finish_update()
        k = self.next
        w.placed = None  # cut from the last best response's samples
        w.source.placed_buffer = None
        learner = w.learner
        learner.state = learner.fresh_state(w.experiment.seed + k)
        learner.version = s.start(k)
        w.source.floor = learner.version
        self.next += 1
        self.publish()
        w.stats.add("best_responses_started")
        w.log(f"best response {k}: a fresh network (seed {w.experiment.seed + k}) as version {learner.version}; "
              f"samples acted before it are dropped")
        return True

    def train_metrics(self, train_metrics: dict[str, Any]) -> dict[str, Any]:
        """A line as the single-process loop's: which best response (1-based ``iteration``) and its own update."""
        version = self.worker.learner.version
        k = self.schedule.response(version)
        return {**train_metrics, "iteration": k + 1, "br_update": version - self.schedule.start(k)}

    def finished(self) -> None:
        """Trained the last best response: tell the controller ``done`` once the manager has joined it."""
        w = self.worker
        if not self.done_seen and time.monotonic() >= self.next_done_check:
            self.next_done_check = time.monotonic() + DONE_CHECK_S
            try:
                w.names.get(manager_done_key(w.experiment))
                self.done_seen = True
            except NameNotFound:
                pass
        if self.done_seen:
            super().finished()
        else:
            if time.monotonic() >= self.next_publish:  # the manager may have missed the last version
                self.publish(fresh=False)
            time.sleep(0.05)
