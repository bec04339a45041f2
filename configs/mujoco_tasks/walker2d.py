"""Walker2d-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/walker2d.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task


def experiment():
    return for_task("Walker2d-v4")
