"""Humanoid-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py`` (initial log std 0, see INIT_LOG_STD there).

    python -m launch.local configs/mujoco_tasks/humanoid.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task
from srljax.config import Promise

PROMISE = Promise(
    "return", median=700, worst=500, wall_s=1800, quick=False,
    source="bench/RESULTS.md, \"MuJoCo PPO on every task\": the sweep configs/sweeps/mujoco.py, seeds 1-3: 1,057 /"
    " 620 / 861 (866-3,258 s under load)",
)


def experiment():
    return for_task("Humanoid-v4")
