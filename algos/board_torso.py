"""A torso for board games whose observation starts with planes ``[C, H, W]`` (OpenSpiel's connect four, tic-tac-toe):
a small CNN on the planes, the rest of the observation (seat, legal-move flags) joined after it.

    algo.network="algos.board_torso:BoardCNN" algo.network_options='{"planes": 3, "height": 6, "width": 7}'

``envs/openspiel.py`` puts the game's observation tensor first (connect four: 3 planes of 6 x 7, its players'
pieces and the empty cells), so the first ``planes x height x width`` features are the board. Convolutions
keep the board's size (3 x 3, SAME padding), so a threat anywhere on it looks the same to the filters.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class BoardCNN(nn.Module):
    planes: int = 3
    height: int = 6
    width: int = 7
    channels: tuple[int, ...] = (64, 64, 64)
    features: int = 256

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        n = self.planes * self.height * self.width
        board = x[:, :n].reshape(-1, self.planes, self.height, self.width).transpose(0, 2, 3, 1)  # NHWC
        for c in self.channels:
            board = nn.relu(nn.Conv(c, (3, 3), padding="SAME")(board))
        h = jnp.concatenate([board.reshape(board.shape[0], -1), x[:, n:]], axis=-1)
        return nn.relu(nn.Dense(self.features)(h))
