"""The trainer's parts, chosen in one place from the run's plan (``srljax.layout.Plan``).

    parts = trainer_parts(worker)       # in Worker.__init__
    parts.learning, parts.source, parts.publisher

One ``Worker`` (trainer.py) runs the loop; what it trains, where its samples come from and where its
params go are three parts:

| run (``worker.plan``)                     | learning                | source                         | publisher         |
|-------------------------------------------|-------------------------|--------------------------------|-------------------|
| one policy, segments (PPO, IMPALA, ...)   | ``RunLearning``         | ``SegmentSource``              | ``Publisher``     |
| one policy, replay (Ape-X)                | ``RunLearning``         | ``ReplaySource``               | ``Publisher``     |
| one policy, search (MuZero)               | ``RunLearning``         | ``SearchSource``               | ``Publisher``     |
| several policies (trainer i: policy i)    | ``PolicyLearning``      | ``SegmentSource(policy=...)``  | ``PolicyPublisher`` |
| PBT population or league (trainer i: member i) | ``MemberLearning`` | ``SegmentSource``              | ``MemberPublisher`` |
| PSRO (one trainer, best responses in turn)| ``PSROLearning``        | ``SegmentSource``              | ``PSROPublisher`` |

Members come first (a population or a league), then PSRO, then several policies, then what the algorithm consumes: no other
place tests the config's feature switches to pick the trainer's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from srljax.system.shell.worker import Worker
from srljax.system.training.learners import MemberLearning, PolicyLearning, RunLearning
from srljax.system.training.members import MemberPublisher
from srljax.system.training.psro_trainer import PSROLearning, PSROPublisher
from srljax.system.training.publishers import PolicyPublisher, Publisher
from srljax.system.training.replay_source import ReplaySource
from srljax.system.training.search_source import SearchSource
from srljax.system.training.sources import SegmentSource


@dataclass(frozen=True)
class TrainerParts:
    learning: RunLearning
    source: SegmentSource | ReplaySource | SearchSource
    publisher: Publisher


def trainer_parts(worker: Worker) -> TrainerParts:
    """The parts of trainer ``worker.index`` for ``worker.plan`` (its attributes unset until ``setup``)."""
    plan, index = worker.plan, worker.index
    lockstep = worker.cfg.layout.deterministic  # update k: every actor's k-th segment, in actor order
    if plan.members:  # a PBT population or a league: trainer i trains member i
        return TrainerParts(MemberLearning(index), SegmentSource(worker, lockstep=lockstep),
                            MemberPublisher(worker, plan.members, league=bool(plan.league), pbt=plan.pbt))
    if plan.psro:  # PSRO: one trainer, a best response after another (psro_trainer.py)
        return TrainerParts(PSROLearning(), SegmentSource(worker, lockstep=lockstep), PSROPublisher(worker))
    if plan.policies:  # several policies: trainer i trains policy i
        policy = plan.policies[index]
        return TrainerParts(PolicyLearning(policy), SegmentSource(worker, policy=policy, lockstep=lockstep),
                            PolicyPublisher(worker, policy, len(plan.policies), policies=plan.policies))
    if plan.replay:  # Ape-X's learner: batches from the replay shards
        return TrainerParts(RunLearning(), ReplaySource(worker), Publisher(worker))
    if plan.consumes == "search":  # MuZero's learner: window batches from the buffers, targets made there
        return TrainerParts(RunLearning(), SearchSource(worker), Publisher(worker))
    return TrainerParts(RunLearning(), SegmentSource(worker, lockstep=lockstep), Publisher(worker))
