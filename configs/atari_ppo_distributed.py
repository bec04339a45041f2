"""Atari PPO (Pong by default) as a worker graph: 2 actors with env rings, 1 policy worker, 1 trainer.

    python -m launch.local configs/atari_ppo_distributed.py
    python -m launch.local configs/atari_ppo_distributed.py env.id=Breakout-v5 layout.ring_size=4

The PPO settings are those of ``configs/atari_ppo.py``; its envs are split over the actors, each
stepping an envpool ring of ``layout.ring_size`` batches while the policy worker answers the
others, so a training batch has the same size as there.
"""

import dataclasses

from configs import atari_ppo
from srljax.config import Experiment, LayoutConfig, Promise

NUM_ACTORS = 2

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=30000, quick=False,
    source="PPO on Pong at its budget: CleanRL's ppo_atari reaches ~20 at 10M; not trained to a score on this "
    "2-core machine (~350 env steps/s)",
)


def experiment() -> Experiment:
    return worker_graph(atari_ppo.experiment(), "atari_ppo_distributed")


def worker_graph(base: Experiment, name: str, num_actors: int = NUM_ACTORS) -> Experiment:
    """A single-process PPO config as ``num_actors`` actors with env rings, one policy worker and one trainer, the
    training batch unchanged (``configs/football_ppo_distributed.py`` uses it too)."""
    envs_per_actor = max(1, base.env.num_envs // num_actors)
    return dataclasses.replace(
        base,
        name=name,
        env=dataclasses.replace(base.env, num_envs=envs_per_actor, batch_size=0),
        # workers already collect while the trainer updates; this switch is the single-process loop's
        # the batch of the single-process config, whatever the number of actors
        trainer=dataclasses.replace(base.trainer, overlap_collection=False, batch_envs=base.env.num_envs),
        layout=LayoutConfig(mode="distributed", num_actors=num_actors, num_policy_workers=1, inference="remote",
                            ring_size=2 if envs_per_actor % 2 == 0 else 1),
    )
