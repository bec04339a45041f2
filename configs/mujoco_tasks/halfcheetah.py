"""HalfCheetah-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/halfcheetah.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task
from srljax.config import Promise

PROMISE = Promise(
    "return", median=4500, worst=3500, wall_s=110, quick=False,
    source="bench/RESULTS.md, \"MuJoCo PPO on every task\": the sweep configs/sweeps/mujoco.py, seeds 1-3: 6,440 /"
    " 4,959 / 5,472",
)


def experiment():
    return for_task("HalfCheetah-v4")
