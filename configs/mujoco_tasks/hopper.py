"""Hopper-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/hopper.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task
from srljax.config import Promise

PROMISE = Promise(
    "return", median=2000, worst=1000, wall_s=240, quick=False,
    source="bench/RESULTS.md, \"MuJoCo PPO on every task\": the sweep configs/sweeps/mujoco.py, seeds 1-3: 2,847 /"
    " 1,308 / 2,689 (7.1 min per trial under load)",
)


def experiment():
    return for_task("Hopper-v4")
