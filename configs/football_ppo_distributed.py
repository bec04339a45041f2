"""Football PPO (``academy_empty_goal_close`` by default) as a worker graph: 2 actors with env rings, 1 policy
worker, 1 trainer.

    python -m launch.local configs/football_ppo_distributed.py
    python -m launch.slurm configs/football_ppo_distributed.py env.id=gfootball/academy_3_vs_1_with_keeper-v1
    python -m launch.local configs/football_ppo_distributed.py layout.num_actors=4

The PPO settings are those of ``configs/football_ppo.py``; its envs are split over the actors, each stepping an
envpool ring of ``layout.ring_size`` batches while the policy worker answers the others, so a training batch has
the same size as there.
"""

import dataclasses

from configs import football_ppo
from srljax.config import Experiment, LayoutConfig

NUM_ACTORS = 2


def experiment() -> Experiment:
    base = football_ppo.experiment()
    envs_per_actor = max(1, base.env.num_envs // NUM_ACTORS)
    return dataclasses.replace(
        base,
        name="football_ppo_distributed",
        env=dataclasses.replace(base.env, num_envs=envs_per_actor, batch_size=0),
        # workers already collect while the trainer updates; that switch is the single-process loop's
        trainer=dataclasses.replace(base.trainer, overlap_collection=False, batch_envs=base.env.num_envs),
        layout=LayoutConfig(mode="distributed", num_actors=NUM_ACTORS, num_policy_workers=1, inference="remote",
                            ring_size=2 if envs_per_actor % 2 == 0 else 1),
    )
