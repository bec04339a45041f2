"""What the trainer's ``Learner`` trains: the run's experiment, one policy's of several, or one member's.

    learning = RunLearning()                      # chosen by ``parts.trainer_parts``
    cfg, spec = learning.scope(worker, experiment, env_spec)
    learner = learning.make(cfg, spec)

* ``RunLearning``: the experiment and env spec as they are.
* ``PolicyLearning`` (several policies, ``srljax/config/policies.py``): the experiment as its policy sees it
  (``policy_experiment``: the policy's algo and trainer settings, run folder ``RUN_DIR/policies/<name>/`` for
  ``metrics.jsonl`` and ``checkpoints/``), the env as its policy's agents' rows (``algos.multi_policy.policy_spec``),
  the policy's algorithm (``make_policy_algorithm``). The actors act with the whole experiment's composite, whose
  extras size their reply sockets: those go to the controller (``ready_extras``). A policy with ``load`` starts
  from that checkpoint (unless the trial resumes from its own).
* ``MemberLearning`` (a population's or league's member ``i``): ``member_experiment`` (seed ``seed + i``, run
  folder ``RUN_DIR/members/<i>/``, a checkpoint every ``pbt.ready_updates``); its learning rate is the
  publisher's (``members.MemberPublisher``, which reads the manager's directives).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srljax.config.policies import policy_experiment
from srljax.learning.learner import Learner
from srljax.system.shell.membership import member_experiment
from srljax.system.shell.worker import Worker

if TYPE_CHECKING:
    from srljax.config import Experiment
    from srljax.types import EnvSpec

Extras = dict[str, tuple[tuple[int, ...], str]]


class RunLearning:
    def scope(self, worker: Worker, experiment: Experiment, spec: EnvSpec) -> tuple[Experiment, EnvSpec]:
        """The experiment and env spec the learner trains on."""
        return experiment, spec

    def make(self, cfg: Experiment, spec: EnvSpec) -> Learner:
        return Learner(cfg, spec)

    def start(self, worker: Worker) -> None:
        """Once the trainer is set up (its checkpoint restored, if it resumed)."""

    def ready_extras(self, extras_spec: Extras) -> Extras:
        """The extras the actors' segments carry, for the workers configured after the trainer."""
        return extras_spec


class PolicyLearning(RunLearning):
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.composite_extras: Extras = {}  # what actors and policy workers act with (from ``scope``)

    def scope(self, worker: Worker, experiment: Experiment, spec: EnvSpec) -> tuple[Experiment, EnvSpec]:
        import algos
        from algos.multi_policy import policy_spec

        agents = experiment.policies.agents_of(self.policy)
        self.composite_extras = algos.make(experiment, spec).extras_spec
        cfg = policy_experiment(experiment, self.policy)
        worker.log(f"policy {self.policy!r}: agents {list(agents)}, run folder {cfg.run_dir}")
        return cfg, policy_spec(spec, agents)

    def make(self, cfg: Experiment, spec: EnvSpec) -> Learner:
        from algos.multi_policy import make_policy_algorithm

        return Learner(cfg, spec, algo=make_policy_algorithm(cfg, spec))

    def start(self, worker: Worker) -> None:
        import jax

        from srljax.learning.policies import load_policy_state

        load = worker.experiment.policies.get(self.policy).load
        if load and not worker.resume:
            state = load_policy_state(worker.experiment, self.policy, worker.env_spec)
            worker.learner.state = jax.device_put(state, worker.learner._replicated)
            worker.log(f"policy {self.policy!r} starts from {load}")

    def ready_extras(self, extras_spec: Extras) -> Extras:
        return self.composite_extras


class MemberLearning(RunLearning):
    def __init__(self, index: int) -> None:
        self.index = index

    def scope(self, worker: Worker, experiment: Experiment, spec: EnvSpec) -> tuple[Experiment, EnvSpec]:
        return member_experiment(experiment, self.index), spec
