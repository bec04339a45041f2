"""PolicyTrainerWorker: the trainer of one policy of several (``srljax/config/policies.py``).

    worker = PolicyTrainerWorker(cfg, index=1, names=names)   # trains cfg.policies.training()[1]

A ``TrainerWorker`` that sees the experiment as its policy does (``policy_experiment``: the policy's algo and
trainer settings, run folder ``RUN_DIR/policies/<name>/`` for ``metrics.jsonl`` and ``checkpoints/``) and the
env as its policy's agents' rows (``algos.multi_policy.policy_spec``). It binds its own samples and params
sockets: actors push it only its policy's part of each segment (``PolicySender``; a part whose ``meta`` names
another policy is dropped, ``samples_wrong_policy``), and followers subscribe to it by index. A policy with
``load`` starts from that checkpoint (unless the trial resumes from its own).

The trial is done when every policy's trainer is: each one, having trained its updates, adds
``<exp>/<trial>/trainer/<i>/done`` to the name service and keeps draining its samples socket (so actors never
block on a finished policy while another still trains) and republishing its params; trainer 0 tells the
controller ``done`` once every training policy's key is there.
"""

from __future__ import annotations

import time
from typing import Any

from algos.multi_policy import make_policy_algorithm
from srljax.comm import Message, NameNotFound
from srljax.config.policies import policy_experiment, trainer_policy
from srljax.layout import TRAINER
from srljax.learning.learner import Learner
from srljax.learning.policies import POLICY_KEY, load_policy_state
from srljax.system.shell.common import stream_key
from srljax.system.training.trainer import TrainerWorker

DONE = "done"  # the name-service stream key a finished policy trainer adds
DONE_CHECK_S = 0.5


class PolicyTrainerWorker(TrainerWorker):
    def setup(self) -> None:
        import jax

        import algos
        from algos.multi_policy import policy_spec

        self.experiment = self.cfg  # the whole experiment (names keys, the other policies)
        self.env_spec = self.spec
        self.policy = trainer_policy(self.cfg, self.index)
        agents = self.cfg.policies.agents_of(self.policy)
        # what actors and policy workers act with: the composite's extras size their reply sockets
        self.composite_extras = algos.make(self.experiment, self.env_spec).extras_spec
        self.cfg = policy_experiment(self.experiment, self.policy)
        self.spec = policy_spec(self.env_spec, agents)
        self.names.delete(self._done_key(self.index))
        self.finished = False
        self.next_done_check = 0.0
        self.log(f"policy {self.policy!r}: agents {list(agents)}, run folder {self.cfg.run_dir}")
        super().setup()
        self.done_sent = True  # TrainerWorker's own ``done`` would end the trial when the first policy is done
        self.trial_done_sent = False
        if self.experiment.policies.get(self.policy).load and not self.resume:
            state = load_policy_state(self.experiment, self.policy, self.env_spec)
            self.learner.state = jax.device_put(state, self.learner._replicated)
            self.log(f"policy {self.policy!r} starts from {self.experiment.policies.get(self.policy).load}")

    def make_learner(self) -> Learner:
        return Learner(self.cfg, self.spec, algo=make_policy_algorithm(self.cfg, self.spec))

    def register(self, stream: str, address: str) -> None:
        self._addresses[stream] = address
        self.names.add(stream_key(self.experiment, self.role, self.index, stream), address)

    def ready_info(self) -> dict[str, Any]:
        return {"extras_spec": {k: [list(shape), dtype] for k, (shape, dtype) in self.composite_extras.items()}}

    def _done_key(self, index: int) -> str:
        return stream_key(self.experiment, TRAINER, index, DONE)

    def _take(self, msg: Message) -> None:
        if msg.meta.get(POLICY_KEY) != self.policy:
            self.stats.add("samples_wrong_policy")
            return
        super()._take(msg)

    def poll(self) -> None:
        if not (self.learner.version >= self.cfg.num_updates and self.running is None):
            return super().poll()
        if not self.finished:
            self.finished = True
            self.names.add(self._done_key(self.index), str(self.learner.version))
            self.log(f"policy {self.policy!r} trained its {self.learner.version} updates")
        while self.receiver.recv(timeout_ms=0) is not None:  # a finished policy must not block the actors
            self.stats.add("samples_after_done")
        if time.monotonic() >= self.next_publish:
            self._publish(fresh=False)
        if self.index == 0 and not self.trial_done_sent and time.monotonic() >= self.next_done_check:
            self.next_done_check = time.monotonic() + DONE_CHECK_S
            if self.trial_complete():
                self.trial_done_sent = True
                self.tell_controller("done", {"env_steps": self.total_env_steps, "updates": self.learner.version,
                                              "policies": list(self.experiment.policies.training())})
        time.sleep(0.02)

    def trial_complete(self) -> bool:
        """Whether every trainer of the trial has added its ``done`` key (checked by trainer 0)."""
        return all(self._is_done(i) for i in range(self.trainers_in_trial()))

    def trainers_in_trial(self) -> int:
        """Trainers whose ``done`` key ends the trial (``MemberTrainerWorker``: one per population member)."""
        return len(self.experiment.policies.training())

    def _is_done(self, index: int) -> bool:
        try:
            self.names.get(self._done_key(index))
        except NameNotFound:
            return False
        return True
