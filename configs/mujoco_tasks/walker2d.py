"""Walker2d-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/walker2d.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task
from srljax.config import Promise

PROMISE = Promise(
    "return", median=2500, worst=1000, wall_s=240, quick=False,
    source="bench/RESULTS.md, \"MuJoCo PPO on every task\": the sweep configs/sweeps/mujoco.py, seeds 1-3: 3,481 /"
    " 5,381 / 1,381 (wall under load 18.8 min)",
)


def experiment():
    return for_task("Walker2d-v4")
