"""The part of an envpool-backed vectorised env that does not depend on the task (no envpool import here).

``EnvpoolVecEnv`` (single agent, ``envs/envpool_env.py``) and ``EnvpoolMultiAgentVecEnv``
(``envs/multi_agent.py``) differ only in how they build their spec and convert actions and results.
"""

from __future__ import annotations

import numpy as np

from envs.base import require_sync
from envs.episode_stats import EpisodeStats
from srljax.types import TimeStep


class EnvpoolBatch:
    """What every envpool-backed batch shares: sync ``reset``/``step``, async ``async_reset``/``send``/``recv``.

    A subclass sets ``self._env``, ``self.spec`` and ``self._stats`` and converts results in
    ``_timestep`` (rows in ``info["env_id"]`` order) and actions in ``_to_env_action``.
    """

    _env: object
    spec: object
    _stats: EpisodeStats

    @property
    def is_async(self) -> bool:
        return self.spec.batch_size < self.spec.num_envs

    def reset(self) -> TimeStep:
        require_sync(self.spec, "reset")
        self._stats.begin()
        obs, info = self._env.reset()
        n = len(info["env_id"])
        no_flags = np.zeros(n, bool)
        return self._timestep(obs, np.zeros(n, np.float32), no_flags, no_flags, info)

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        require_sync(self.spec, "step")
        ids = None if env_id is None else np.asarray(env_id, np.int32)
        return self._timestep(*self._env.step(self._to_env_action(action), ids))

    def async_reset(self) -> None:
        self._stats.begin()
        self._env.async_reset()

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        self._env.send(self._to_env_action(action), np.asarray(env_id, np.int32))

    def recv(self) -> TimeStep:
        return self._timestep(*self._env.recv())

    def close(self) -> None:
        self._env.close()

    def _to_env_action(self, action: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _timestep(self, obs, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                  info: dict) -> TimeStep:
        raise NotImplementedError
