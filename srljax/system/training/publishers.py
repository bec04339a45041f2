"""The trainer's publisher: its params out on the params stream, and how its trial ends.

    publisher = Publisher(worker)                                  # the run's one trainer (group)
    publisher = PolicyPublisher(worker, "left", trainers=2)        # one trainer of several: a policy's
    publisher = MemberPublisher(worker, trainers=4, league=0, pbt=True)   # a population's or league's member (members.py)

Chosen by ``parts.trainer_parts``. Process 0 of a trainer group publishes (``ParamsPublisher``): when an update
ends, every ``trainer.publish_every`` updates (and after the last); whenever the trainer is idle waiting for
samples with unpublished updates (free, and it frees actors throttled on an older version); and again every
second (PUB drops; late subscribers). Private copies of the params go on the wire (sends are zero-copy and jax
may reuse device buffers). After ``cfg.num_updates`` updates, trainer 0 tells the controller ``done``.

Several trainers in a trial (several policies, ``srljax/config/policies.py``; a population's or a league's
members): each one, having trained its updates, adds ``<exp>/<trial>/trainer/<i>/done`` to the name service and
keeps draining its samples socket (so actors never block on a finished trainer while another still trains) and
republishing its params; trainer 0 tells the controller ``done`` once every trainer's key is there (a league's
trial also waits for its manager's key: its last bot evaluations written).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from srljax.comm import NameNotFound, ParamsPublisher
from srljax.layout import LEAGUE, PARAMS, TRAINER
from srljax.system.shell.common import bind_address, stream_key
from srljax.system.shell.worker import Worker
from srljax.system.training.params import ParamsCodec

REPUBLISH_S = 1.0
DONE = "done"  # the name-service stream key a finished trainer of several adds (and the league manager)
DONE_CHECK_S = 0.5


class Publisher:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.codec: ParamsCodec | None = None
        self.sender: ParamsPublisher | None = None  # process 0 of a group only
        self.wire_params: tuple[int, list[np.ndarray]] | None = None
        self.next_publish = 0.0
        self.published = -1  # the newest version published
        self.done_sent = False

    def prepare(self) -> None:
        """Before the learner exists."""

    def setup(self) -> None:
        """Once the learner exists: bind the params stream (process 0 of a group)."""
        w = self.worker
        self.codec = ParamsCodec(w.learner.algo)
        if w.primary:
            self.sender = ParamsPublisher(bind_address(w.cfg), w.trial, ctx=w.ctx)
            w.register(PARAMS, self.sender.address)

    def start(self) -> None:
        """Once the trainer is set up (``MemberPublisher``: its learning rate, ready points and directives)."""

    def publish(self, fresh: bool = True) -> None:
        """Publish the current params (``fresh``), or the last published ones again."""
        learner = self.worker.learner
        version = learner.version if fresh else self.wire_params[0]
        if self.wire_params is None or self.wire_params[0] != version:
            # private copies: sends are zero-copy and jax may reuse device buffers
            self.wire_params = (version, [np.array(x) for x in self.codec.to_wire(learner.policy_params())])
        self.sender.publish(version, self.wire_params[1])
        self.next_publish = time.monotonic() + REPUBLISH_S
        self.published = version
        self.worker.stats.add("publishes")

    def republish(self) -> None:
        """Again when a second has passed (PUB drops, subscribers join late): the last params, or the first."""
        if time.monotonic() >= self.next_publish:
            self.publish(fresh=self.wire_params is None)

    # -- the loop's hooks ------------------------------------------------------------------------------------
    def poll(self) -> None:
        """First in every poll (``MemberPublisher``: the manager's directives)."""

    def after_done(self) -> bool:
        """Whether this poll was this trainer's work once its updates are trained (several trainers' done keys)."""
        return False

    def finished(self) -> None:
        """The trainer trained its updates: trainer 0 tells the controller ``done``, once."""
        w = self.worker
        if w.primary and not self.done_sent:
            self.done_sent = True
            w.tell_controller("done", {"env_steps": w.source.total_env_steps, "updates": w.learner.version})
        time.sleep(0.05)

    def may_update(self) -> bool:
        """Whether the next update may start now (``MemberPublisher``: not while at a PBT ready point)."""
        return True

    def waiting(self) -> str:
        return ""

    def train_metrics(self, train_metrics: dict[str, Any]) -> dict[str, Any]:
        """An update's metrics as its line shows them."""
        return train_metrics

    def state(self) -> dict[str, Any]:
        """The publisher's part of a checkpoint's meta."""
        return {}

    def metrics(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        if self.sender is not None:
            self.sender.close()


class HoldsDirectives:
    """Mixed into a publisher that takes a manager's directives (``self.directives``: a ``DirectiveReceiver`` once
    started): its counters are the worker's metrics, and it closes with the publisher."""

    directives: Any = None

    def metrics(self) -> dict[str, Any]:
        if self.directives is None:
            return {}
        return {f"directives/{k}": v for k, v in self.directives.counters().items()}

    def close(self) -> None:
        try:
            super().close()  # type: ignore[misc] - the publisher's
        finally:
            if self.directives is not None:
                self.directives.close()


class PolicyPublisher(Publisher):
    """One trainer of several: ``name`` in its log lines, ``trainers`` done keys end the trial."""

    def __init__(self, worker: Worker, name: str, trainers: int, league: bool = False,
                 policies: tuple[str, ...] = ()) -> None:
        super().__init__(worker)
        self.name = name
        self.trainers = trainers
        self.league = league  # the trial also waits for the league manager's done key
        self.policies = policies  # the training policies, in the ``done`` message
        self.trained = False  # its done key is added
        self.next_done_check = 0.0
        self.trial_done_sent = False

    def prepare(self) -> None:
        self.worker.names.delete(self._done_key(TRAINER, self.worker.index))  # a restarted trainer trains again

    def _done_key(self, role: str, index: int) -> str:
        return stream_key(self.worker.experiment, role, index, DONE)

    def after_done(self) -> bool:
        w = self.worker
        if not (w.learner.version >= w.cfg.num_updates and w.running is None):
            return False
        if not self.trained:
            self.trained = True
            w.names.add(self._done_key(TRAINER, w.index), str(w.learner.version))
            w.log(f"policy {self.name!r} trained its {w.learner.version} updates")
        while w.receiver.recv(timeout_ms=0) is not None:  # a finished trainer must not block the actors
            w.stats.add("samples_after_done")
        if time.monotonic() >= self.next_publish:
            self.publish(fresh=False)
        if w.index == 0 and not self.trial_done_sent and time.monotonic() >= self.next_done_check:
            self.next_done_check = time.monotonic() + DONE_CHECK_S
            if self.trial_complete():
                self.trial_done_sent = True
                w.tell_controller("done", {"env_steps": w.source.total_env_steps, "updates": w.learner.version,
                                           "policies": list(self.policies)})
        time.sleep(0.02)
        return True

    def finished(self) -> None:
        time.sleep(0.05)  # the trial is done when every trainer is (``after_done``)

    def trial_complete(self) -> bool:
        """Whether every trainer of the trial has added its ``done`` key (checked by trainer 0), and a league's
        manager its own."""
        keys = [self._done_key(TRAINER, i) for i in range(self.trainers)]
        return all(self._exists(k) for k in keys + ([self._done_key(LEAGUE, 0)] if self.league else []))

    def _exists(self, key: str) -> bool:
        try:
            self.worker.names.get(key)
        except NameNotFound:
            return False
        return True
