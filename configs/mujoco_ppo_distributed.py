"""MuJoCo PPO (HalfCheetah-v4) as a worker graph: 2 actors with inline inference, 1 trainer.

    python -m launch.local configs/mujoco_ppo_distributed.py                       # one process per worker
    python bench/mujoco_ppo.py --config configs/mujoco_ppo_distributed.py          # 3 seeds at 1M steps

The PPO settings are those of ``configs/mujoco_ppo.py``; its 64 envs are split over the actors
(32 each) and ``trainer.batch_envs`` keeps a training batch at 64 envs x 32 steps, whatever the
number of actors (``layout.num_actors=4`` gives 16 envs each, the same batch). Each actor steps its
own envpool and runs the small MLP policy itself (``layout.inference=inline``): MuJoCo steps in
microseconds, so a request to a policy worker costs more than it saves. Actors never wait on a
params version; the samples a batch is made of are typically one to three versions old (see
bench/RESULTS.md for the lag distribution and returns in this layout).
"""

import dataclasses

from configs import mujoco_ppo
from srljax.config import Experiment, LayoutConfig, Promise

NUM_ACTORS = 2

PROMISE = Promise(
    "return", median=4000, worst=2500, wall_s=100, quick=False,
    source="bench/RESULTS.md: bench/mujoco_ppo.py --config configs/mujoco_ppo_distributed.py, seeds 1-3 in two "
    "runs: 3,324 / 5,457 / 5,740 and 4,779 / 5,425 / 4,472 (not reproducible per seed)",
)


def experiment() -> Experiment:
    base = mujoco_ppo.experiment()
    return dataclasses.replace(
        base,
        name="mujoco_ppo_distributed",
        env=dataclasses.replace(base.env, num_envs=base.env.num_envs // NUM_ACTORS, batch_size=0),
        trainer=dataclasses.replace(base.trainer, batch_envs=base.env.num_envs),
        layout=LayoutConfig(mode="distributed", num_actors=NUM_ACTORS, inference="inline", ring_size=1),
    )
