"""CartPole-v1 with PPO on a network of your own (``examples/custom_torso.py``'s ``ResidualTorso``).

    python -m launch.local examples/cartpole_custom_torso.py
    python -m launch.local examples/cartpole_custom_torso.py algo.network_options.blocks=2

The same module under DQN is one override of the DQN config:

    python -m launch.local configs/cartpole_dqn.py algo.network=examples.custom_torso:ResidualTorso

and in the distributed layout, with remote inference (the policy worker builds it from the config):

    python -m launch.local configs/cartpole_ppo_distributed.py algo.network=examples.custom_torso:ResidualTorso

Settings as ``configs/cartpole_ppo.py`` (CleanRL's CartPole PPO), whose two separate 64-unit tanh MLPs are
replaced by one shared residual torso.
"""

import dataclasses

from configs.cartpole_ppo import experiment as cartpole_ppo
from srljax.config import Experiment, Promise

PROMISE = Promise(
    "return", median=450, worst=300, wall_s=35,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 500.0 / 500.0, 32-39 s",
)


def experiment() -> Experiment:
    cfg = cartpole_ppo()
    algo = dataclasses.replace(cfg.algo, network="examples.custom_torso:ResidualTorso",
                               network_options={"width": 64, "blocks": 1})
    return dataclasses.replace(cfg, algo=algo)
