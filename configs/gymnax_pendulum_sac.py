"""Pendulum-v1 as a JAX env (gymnax) with SAC: acting, the on-device replay and updates in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_pendulum_sac.py

``configs/mujoco_sac.py`` (CleanRL's SAC: one update of 256 samples per env step, tau 0.005) with 64x64 networks,
1,000 random steps first and a 20k replay, on 4 envs for 20k steps. Random play scores about -1,200, a solved
pendulum about -150.
"""

import dataclasses

from configs.mujoco_sac import experiment as mujoco_experiment
from srljax.config import EnvConfig, Experiment, LogConfig, Promise

PROMISE = Promise(
    "return", median=-250, worst=-400, wall_s=40, quick=False,
    source="bench/RESULTS.md (the Anakin path): -124.8 / -152.6 / -148.9 (seeds 1-3, 62 s packed, ~450 env steps/s "
    "at one update of 256 per env step)",
)


def experiment() -> Experiment:
    cfg = mujoco_experiment()
    algo = dataclasses.replace(cfg.algo, learning_starts=1_000, hidden_sizes=(64, 64),
                               replay=dataclasses.replace(cfg.algo.replay, capacity=20_000))
    return dataclasses.replace(cfg, total_env_steps=20_000, env=EnvConfig(id="gymnax/Pendulum-v1", num_envs=4),
                               algo=algo, log=LogConfig(log_every=500))
