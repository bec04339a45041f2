"""InvertedPendulum-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/inverted_pendulum.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task


def experiment():
    return for_task("InvertedPendulum-v4")
