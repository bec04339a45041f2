"""CartPole-v1 as a JAX env (gymnax) with DQN: acting, the on-device replay and updates in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_cartpole_dqn.py

``configs/cartpole_dqn.py`` exactly (CleanRL's settings on 8 envs, 16 updates per 160 env steps) on gymnax's
CartPole; the replay lives on the device (``srljax/learning/anakin_replay.py``).
"""

import dataclasses

from configs.cartpole_dqn import experiment as envpool_experiment
from srljax.config import EnvConfig, Experiment, Promise

PROMISE = Promise(
    "return", median=400, worst=250, wall_s=55, quick=False,
    source="bench/RESULTS.md (the Anakin path): 463 / 337 / 500 (acting return, epsilon 0.05; seeds 1-3 packed); one "
    "seed 52 s under load. Not in the quick gate: it would pass its 45-minute budget",
)


def experiment() -> Experiment:
    return dataclasses.replace(envpool_experiment(), env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8))
