"""InvertedPendulum-v4 with the MuJoCo PPO settings of ``configs/mujoco_ppo_all_tasks.py``.

    python -m launch.local configs/mujoco_tasks/inverted_pendulum.py seed=2
"""

from configs.mujoco_ppo_all_tasks import for_task
from srljax.config import Promise

PROMISE = Promise(
    "return", median=950, worst=900, wall_s=130, quick=False,
    source="bench/RESULTS.md, \"MuJoCo PPO on every task\": the sweep configs/sweeps/mujoco.py, seeds 1-3: 1000 / "
    "1000 / 1000",
)


def experiment():
    return for_task("InvertedPendulum-v4")
