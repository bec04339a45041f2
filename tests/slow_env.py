"""A gymnasium env for the subprocess VecEnv's tests: each ``step`` sleeps ``step_ms`` (a slow Python env).

    SubprocVecEnv(functools.partial(SleepyEnv, step_ms=20), num_envs=8, seed=0, processes=4)

The observation [2, 3] (``obs_dtype``) counts the episode's steps and carries the reset's draw (x 100) from
the env's random stream; the reward is ``action + 0.5``; episodes last ``length`` steps (terminated);
``fail_at`` makes ``step`` raise on that step of every episode.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np


class SleepyEnv(gymnasium.Env):
    action_space = gymnasium.spaces.Discrete(3)

    def __init__(self, step_ms: float = 0.0, length: int = 5, fail_at: int = 0, obs_dtype: str = "float64"):
        self.observation_space = gymnasium.spaces.Box(0, 255, (2, 3), np.dtype(obs_dtype))
        self.step_s, self.length, self.fail_at = step_ms / 1e3, length, fail_at
        self.t, self.draw = 0, 0.0

    def _obs(self) -> np.ndarray:
        return np.array([[self.t, self.draw, 0.0], [1.0, 2.0, 3.0]]).astype(self.observation_space.dtype)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t, self.draw = 0, 100 * float(self.np_random.random())
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.step_s:
            time.sleep(self.step_s)
        self.t += 1
        if self.t == self.fail_at:
            raise ValueError(f"step {self.t} of this episode fails on purpose")
        return self._obs(), float(action) + 0.5, self.t >= self.length, False, {}
