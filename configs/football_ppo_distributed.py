"""Football PPO (``academy_empty_goal_close`` by default) as a worker graph: 2 actors with env rings, 1 policy
worker, 1 trainer.

    python -m launch.local configs/football_ppo_distributed.py
    python -m launch.slurm configs/football_ppo_distributed.py env.id=gfootball/academy_3_vs_1_with_keeper-v1
    python -m launch.local configs/football_ppo_distributed.py layout.num_actors=4

The PPO settings are those of ``configs/football_ppo.py``; its envs are split over the actors, each stepping an
envpool ring of ``layout.ring_size`` batches while the policy worker answers the others, so a training batch has
the same size as there.
"""

from configs import football_ppo
from configs.atari_ppo_distributed import worker_graph
from srljax.config import Experiment, Promise

PROMISE = Promise(
    "return", median=0.8, worst=0.6, wall_s=1400, quick=False,
    source="football_ppo.py's figures (the same algorithm and batch as a worker graph); not run to a score here",
)


def experiment() -> Experiment:
    return worker_graph(football_ppo.experiment(), "football_ppo_distributed")
