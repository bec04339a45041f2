"""A VecEnv stepped by a plain Python loop over single envs, with envpool's semantics.

Subclass it and say how to reset and step env ``index``; sync and async modes, lazy autoreset
and true episode statistics come for free::

    class Counter(PythonLoopVecEnv):
        def __init__(self, num_envs: int, batch_size: int | None = None):
            super().__init__(EnvSpec(id="Counter", obs_shape=(1,), obs_dtype="float32",
                                     action_kind="discrete", num_actions=2,
                                     num_envs=num_envs, batch_size=batch_size or num_envs))
            self.count = [0] * num_envs

        def _reset_env(self, index):
            self.count[index] = 0
            return np.zeros(1)

        def _step_env(self, index, action):
            self.count[index] += 1
            return np.full(1, self.count[index]), 1.0, False, self.count[index] >= 10

Lazy autoreset, as envpool: the step after a done ignores its action and returns ``_reset_env``'s observation
with reward 0 and no flags. Async mode is emulated: ``send`` steps at once and queues; ``recv`` returns batches
in the order sent.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from envs.base import require_sync
from envs.episode_stats import EpisodeStats
from srljax.types import EnvSpec, TimeStep


class PythonLoopVecEnv:
    """Base class: implement ``_reset_env(index) -> obs`` and ``_step_env(index, action)``."""

    def __init__(self, spec: EnvSpec):
        if spec.batch_size < 1 or spec.num_envs % spec.batch_size:
            raise ValueError(f"batch_size={spec.batch_size} must divide num_envs={spec.num_envs}")
        self.spec = spec
        self._needs_reset = np.ones(spec.num_envs, bool)
        self._stats = EpisodeStats(spec.num_envs)
        self._ready: deque[TimeStep] = deque()

    # -- to implement ------------------------------------------------------------------
    def _reset_env(self, index: int) -> np.ndarray:
        """Start a new episode in env ``index``; return its first observation."""
        raise NotImplementedError

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        """Apply one action to env ``index``; return ``(obs, reward, terminated, truncated)``."""
        raise NotImplementedError

    # -- VecEnv ------------------------------------------------------------------------
    @property
    def is_async(self) -> bool:
        return self.spec.batch_size < self.spec.num_envs

    def reset(self) -> TimeStep:
        require_sync(self.spec, "reset")
        self._ready.clear()
        self._begin_all()
        return self._advance(np.arange(self.spec.num_envs, dtype=np.int32), None)

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        require_sync(self.spec, "step")
        ids = np.arange(self.spec.num_envs, dtype=np.int32) if env_id is None else np.asarray(env_id, np.int32)
        return self._advance(ids, action)

    def async_reset(self) -> None:
        self._ready.clear()
        self._begin_all()
        all_ids = np.arange(self.spec.num_envs, dtype=np.int32)
        for ids in np.split(all_ids, self.spec.num_envs // self.spec.batch_size):
            self._ready.append(self._advance(ids, None))

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        self._ready.append(self._advance(np.asarray(env_id, np.int32), action))

    def recv(self) -> TimeStep:
        if not self._ready:
            raise RuntimeError("recv() has nothing to return: call async_reset() or send() first")
        return self._ready.popleft()

    def close(self) -> None:
        self._ready.clear()

    # -- internals ---------------------------------------------------------------------
    def _begin_all(self) -> None:
        # Every env's next row is its reset row, whatever it was doing before.
        self._needs_reset[:] = True
        self._stats.begin()

    def _advance(self, ids: np.ndarray, action: np.ndarray | None) -> TimeStep:
        """Step (or lazily reset) each env in ``ids``; ``action`` None only for reset rows."""
        if action is not None and len(action) != len(ids):
            raise ValueError(f"{len(action)} actions for {len(ids)} env ids")
        rows = []
        for row, index in enumerate(ids.tolist()):
            if self._needs_reset[index]:
                rows.append((self._reset_env(index), 0.0, False, False))
                self._needs_reset[index] = False
            else:
                assert action is not None, "only reset rows may come without an action"
                obs, reward, terminated, truncated = self._step_env(index, action[row])
                rows.append((obs, reward, bool(terminated), bool(truncated)))
                self._needs_reset[index] = terminated or truncated
        obs = np.stack([np.asarray(r[0]) for r in rows]).astype(self.spec.obs_dtype)
        raw_reward = np.array([r[1] for r in rows], np.float64)  # statistics add in float64
        terminated = np.array([r[2] for r in rows], bool)
        truncated = np.array([r[3] for r in rows], bool)
        done = terminated | truncated
        episode_return, episode_length = self._stats.update(ids, raw_reward, done, game_over=done)
        return TimeStep(
            obs=obs,
            reward=raw_reward.astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            env_id=ids,
            episode_return=episode_return,
            episode_length=episode_length,
        )
