"""CartPole-v1 as a JAX env (gymnax) with DQN: acting, the on-device replay and updates in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_cartpole_dqn.py
    python -m launch.local configs/gymnax_cartpole_dqn.py seeds=[1,2,3]     # three seeds in one program

``configs/cartpole_dqn.py`` (CleanRL's settings on 8 envs, 16 updates per 160 env steps) on gymnax's CartPole, the
replay on the device (``srljax/learning/anakin_replay.py``), with one change: the learning rate decays linearly to 0
over the run (``trainer.anneal_lr``), so the last updates settle the policy instead of moving it (at a constant rate
the greedy policy at the end was 500 / 323.5 / 485.2 on seeds 1-3; decayed, 500 / 500 / 493.8: bench/RESULTS.md,
issue 39, helper 39a).
"""

import dataclasses

from configs.cartpole_dqn import experiment as envpool_experiment
from srljax.config import EnvConfig, Experiment, Promise

PROMISE = Promise(
    "return", median=475, worst=425, wall_s=55, quick=False,
    source="bench/RESULTS.md (issue 39, helper 39a): 500 / 500 / 488.5 (acting return, epsilon 0.05; seeds 1-3 "
    "packed), greedy evaluation at the end 500 / 500 / 493.8; one seed ~52 s. Not in the quick gate: it would pass "
    "its 45-minute budget",
)


def experiment() -> Experiment:
    base = envpool_experiment()
    return dataclasses.replace(base, env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8),
                               trainer=dataclasses.replace(base.trainer, anneal_lr=True))
