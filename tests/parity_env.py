"""A deterministic env for exact-resume tests: ``env.factory="tests.parity_env:make_env"``.

Every episode lasts ``env.max_episode_steps`` steps, starts from the same observation whatever
happened before (so a recreated env continues exactly where an episode boundary left the old one),
and pays ``env.options["reward"]`` (default 1) when the action equals the parity of the step index (so the
policy has something to learn). Its ``OPTIONS`` show a user's env family declaring its own options.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.options import with_defaults
from envs.python_loop import PythonLoopVecEnv
from srljax.config import EnvConfig
from srljax.types import EnvSpec


class Parity(PythonLoopVecEnv):
    def __init__(self, num_envs: int, length: int, reward: float = 1.0):
        super().__init__(EnvSpec(id="Parity", obs_shape=(2,), obs_dtype="float32", action_kind="discrete",
                                 num_actions=2, num_envs=num_envs, batch_size=num_envs, max_episode_steps=length))
        self.length, self.reward = length, reward
        self._t = np.zeros(num_envs, np.int64)

    def _obs(self, index: int) -> np.ndarray:
        t = self._t[index]
        return np.array([t % 2, t / self.length], np.float32)

    def _reset_env(self, index: int) -> np.ndarray:
        self._t[index] = 0
        return self._obs(index)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        reward = self.reward if int(action) == self._t[index] % 2 else 0.0
        self._t[index] += 1
        return self._obs(index), reward, bool(self._t[index] >= self.length), False


OPTIONS = {"reward": 1.0}
"""this family's ``env.options`` and their defaults (``envs/options.py``)."""


def make_env(cfg: EnvConfig, seed: int) -> Parity:
    return Parity(cfg.num_envs, cfg.max_episode_steps, with_defaults(cfg.options, OPTIONS)["reward"])


make_env.options = OPTIONS
