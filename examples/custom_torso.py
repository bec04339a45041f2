"""A network of your own under a built-in algorithm: a Flax module named by ``algo.network``.

    python -m launch.local examples/cartpole_custom_torso.py                      # PPO
    python -m launch.local configs/cartpole_dqn.py algo.network=examples.custom_torso:ResidualTorso

The module is a torso: it gets a batch of observations ``[B, *O]`` (float32) and returns features ``[B, F]``;
the algorithm puts its heads on them (PPO/IMPALA: policy and value heads on one shared torso; DQN: the Q head;
MAPPO: one torso for the actor and one for the critic, each on an agent's row). Its fields are set from
``algo.network_options`` (``algo.network_options.width=128`` on the command line), checked before launch.
Every worker builds it from the config, so the module must import where the workers run (here: the repo root).
"""

from __future__ import annotations

import flax.linen as nn
import jax


class ResidualTorso(nn.Module):
    """A linear embedding, then ``blocks`` pre-norm residual blocks (LayerNorm, ReLU, Dense) of ``width`` units."""

    width: int = 64
    blocks: int = 1

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = nn.Dense(self.width)(obs.reshape((obs.shape[0], -1)))
        for _ in range(self.blocks):
            x = x + nn.Dense(self.width)(nn.relu(nn.LayerNorm()(x)))
        return nn.relu(nn.LayerNorm()(x))
