"""A JAX-env grid: PPO on gymnax CartPole at three learning rates x 3 seeds. Each grid point's seeds run as one
launch with ``seeds=[1,2,3]`` (one compiled program, ``launch.sweep.local.packed``), each seed in the folder the
sweep names for it.

    python -m launch.sweep configs/sweeps/gymnax_cartpole.py
"""

from launch.sweep import Sweep


def sweep() -> Sweep:
    return Sweep(configs=["configs/gymnax_cartpole_ppo.py"], grid={"trainer.lr": [2.5e-4, 1e-3, 3e-3]},
                 seeds=[1, 2, 3], overrides=["total_env_steps=200000", "log.wandb=disabled"])
