"""A JAX env as a host ``VecEnv`` (sync only): evaluation, ``launch.play`` and the worker graph's actors step it.

Reset and step are compiled when the env is built (an actor builds it in its setup, inside the controller's configure
time, so a slow first compile, SMAX's, is not a main loop that stopped turning); what comes back is numpy, as from
envpool. ``episode_won`` is the last step's outcome per env where the family reports one (SMAX: 1.0 / 0.0 on the row
that ends an episode, NaN elsewhere; all NaN for families without outcomes), for the actors' ``win_rate``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from envs.base import require_sync
from envs.jax_envs import JaxEnv, make
from srljax.config import EnvConfig
from srljax.types import TimeStep


class JaxVecEnv:
    def __init__(self, cfg: EnvConfig, seed: int):
        self.env: JaxEnv = make(cfg)
        self.spec = self.env.spec
        self._key = jax.random.PRNGKey(seed)
        self.reports_outcomes = self.env.family.won is not None
        key = jax.random.PRNGKey(0)
        state = jax.eval_shape(self.env.reset, key)[0]
        action = jax.ShapeDtypeStruct((self.spec.num_envs, *self.spec.action_shape), self.spec.action_dtype)
        self._reset = jax.jit(self.env.reset).lower(key).compile()
        self._step = jax.jit(self._step_won).lower(state, action).compile()
        self._state: Any = None
        self._pending: TimeStep | None = None
        self.episode_won = np.full(self.spec.num_envs, np.nan, np.float32)

    def _step_won(self, state: Any, action: Any) -> Any:
        state, ts = self.env.step(state, action)
        return state, ts, self.env.episode_won(state)

    def reset(self) -> TimeStep:
        self._key, key = jax.random.split(self._key)
        self._state, ts = self._reset(key)
        self.episode_won = np.full(self.spec.num_envs, np.nan, np.float32)
        return TimeStep(*jax.device_get(ts))

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        if self._state is None:
            raise RuntimeError("step() before reset()")
        if env_id is not None and not np.array_equal(np.sort(np.asarray(env_id)), np.arange(self.spec.num_envs)):
            raise ValueError(f"{self.spec.id} is a JAX env: every step acts in all {self.spec.num_envs} envs "
                             f"(env_id {np.asarray(env_id).tolist()} given)")
        action = np.asarray(action, self.spec.action_dtype)
        if env_id is not None:  # rows in env_id order -> env order
            ordered = np.empty_like(action)
            ordered[np.asarray(env_id)] = action
            action = ordered
        self._state, ts, won = self._step(self._state, action)
        ts, self.episode_won = jax.device_get((ts, won))
        return TimeStep(*ts)

    def async_reset(self) -> None:
        require_sync(self.spec, "async_reset")
        self._pending = self.reset()

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        self._pending = self.step(action, env_id)

    def recv(self) -> TimeStep:
        if self._pending is None:
            raise RuntimeError("recv() without async_reset() or send()")
        ts, self._pending = self._pending, None
        return ts

    def close(self) -> None:
        self._state = self._pending = None
