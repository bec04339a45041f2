"""Humanoid-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py`` (initial log std 0, see INIT_LOG_STD there).

    python -m launch.local configs/mujoco_tasks/humanoid.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task


def experiment():
    return for_task("Humanoid-v4")
