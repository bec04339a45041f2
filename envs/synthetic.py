"""A synthetic env for measuring the system: each batch step costs a set wall time and almost no CPU.

    env.factory=envs.synthetic:make_synthetic env.options.step_ms=20 env.options.obs_shape=84x84x4 \\
        env.options.obs_dtype=uint8

Like a remote simulator, the env's time is spent waiting, not computing, so on a small machine a scaling run
measures the data path (actors, inference, transport, trainer), not the simulator. Options (``OPTIONS``,
checked before launch): ``step_ms`` (wall time of one batch step, each batch in flight waiting on its own),
``obs_shape`` and ``obs_dtype`` (rows of a random table made once from the seed), ``action_kind``
(``num_actions`` or ``action_dim``), ``episode_length`` and ``random_length``. Rewards are learnable (each row
has a target action; matching it earns 1), so a learning curve is a sign of life. Everything follows from the
seed and the order of calls; semantics as envpool (sync and async, lazy autoreset, true episode statistics).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from envs.base import require_sync
from envs.episode_stats import EpisodeStats
from envs.options import with_defaults
from srljax.config import EnvConfig
from srljax.types import EnvSpec, TimeStep

OPTIONS: dict[str, Any] = {
    "step_ms": 20.0,
    "obs_shape": "4",
    "obs_dtype": "float32",
    "action_kind": "discrete",
    "num_actions": 2,
    "action_dim": 1,
    "episode_length": 200,
    "random_length": False,
}
TABLE_ROWS = 64  # distinct observation rows; an env walks them in order from a random start


def parse_obs_shape(text: str) -> tuple[int, ...]:
    """``"84x84x4"`` -> ``(84, 84, 4)``; a clear error for anything else."""
    try:
        shape = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise ValueError(f"env.options.obs_shape={text!r} is not a shape; write sizes joined by x, e.g. '17' or "
                         "'84x84x4'")
    return shape


def synthetic_problems(options: dict[str, Any]) -> list[str]:
    """Value problems of already type-checked options (``envs.options.option_problems`` checks names, types)."""
    o, out = with_defaults(options, OPTIONS), []
    try:
        parse_obs_shape(str(o["obs_shape"]))
    except ValueError as error:
        out.append(str(error))
    if o["obs_dtype"] not in ("float32", "uint8"):
        out.append(f"env.options.obs_dtype={o['obs_dtype']!r}: use float32 or uint8")
    if o["action_kind"] not in ("discrete", "continuous"):
        out.append(f"env.options.action_kind={o['action_kind']!r}: use discrete or continuous")
    for name, low in (("step_ms", 0.0), ("num_actions", 2), ("action_dim", 1), ("episode_length", 1)):
        if isinstance(o[name], (int, float)) and o[name] < low:
            out.append(f"env.options.{name}={o[name]} must be >= {low}")
    return out


class SyntheticVecEnv:
    """``num_envs`` synthetic envs (see the module doc); a VecEnv (``envs/base.py``)."""

    def __init__(self, num_envs: int, seed: int, batch_size: int | None = None, **options: Any):
        problems = synthetic_problems(options)
        if problems:
            raise ValueError("; ".join(problems))
        o = with_defaults(options, OPTIONS)
        obs_shape = parse_obs_shape(str(o["obs_shape"]))
        discrete = o["action_kind"] == "discrete"
        batch_size = batch_size or num_envs
        if batch_size < 1 or num_envs % batch_size:
            raise ValueError(f"batch_size={batch_size} must divide num_envs={num_envs}")
        self.spec = EnvSpec(
            id="Synthetic",
            obs_shape=obs_shape,
            obs_dtype=o["obs_dtype"],
            action_kind="discrete" if discrete else "continuous",
            num_actions=int(o["num_actions"]) if discrete else 0,
            action_shape=() if discrete else (int(o["action_dim"]),),
            action_low=() if discrete else (-1.0,) * int(o["action_dim"]),
            action_high=() if discrete else (1.0,) * int(o["action_dim"]),
            num_envs=num_envs,
            batch_size=batch_size,
            max_episode_steps=0 if o["random_length"] else int(o["episode_length"]),
        )
        self.step_s = float(o["step_ms"]) / 1e3
        self.episode_length = int(o["episode_length"])
        self.random_length = bool(o["random_length"])
        self._rng = np.random.default_rng(seed)
        rows = self._rng.random((TABLE_ROWS, *obs_shape))
        self._table = (rows * 255).astype(np.uint8) if o["obs_dtype"] == "uint8" else rows.astype(np.float32)
        flat = rows.reshape(TABLE_ROWS, -1)  # the target is read off the observation, so a policy can learn it
        if not discrete:
            self._target = 2.0 * flat[:, 0] - 1.0
        elif flat.shape[1] >= self.spec.num_actions:
            self._target = flat[:, :self.spec.num_actions].argmax(axis=1)
        else:  # fewer numbers than actions: a fixed draw per row (learnable by memorising the rows)
            self._target = self._rng.integers(0, self.spec.num_actions, TABLE_ROWS)
        self._start = self._rng.integers(0, TABLE_ROWS, num_envs)  # each env's row offset
        self._elapsed = np.zeros(num_envs, np.int64)
        self._length = np.full(num_envs, self.episode_length, np.int64)
        self._needs_reset = np.ones(num_envs, bool)
        self._stats = EpisodeStats(num_envs)
        self._in_flight: deque[tuple[float, TimeStep]] = deque()  # (ready at, batch), in send order

    # -- VecEnv ------------------------------------------------------------------------
    @property
    def is_async(self) -> bool:
        return self.spec.batch_size < self.spec.num_envs

    def reset(self) -> TimeStep:
        require_sync(self.spec, "reset")
        self._begin_all()
        return self._wait(time.monotonic() + self.step_s, self._advance(self._all_ids(), None))

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        require_sync(self.spec, "step")
        ids = self._all_ids() if env_id is None else np.asarray(env_id, np.int32)
        return self._wait(time.monotonic() + self.step_s, self._advance(ids, np.asarray(action)))

    def async_reset(self) -> None:
        self._begin_all()
        ready_at = time.monotonic() + self.step_s
        for ids in np.split(self._all_ids(), self.spec.num_envs // self.spec.batch_size):
            self._in_flight.append((ready_at, self._advance(ids, None)))

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        ts = self._advance(np.asarray(env_id, np.int32), np.asarray(action))
        self._in_flight.append((time.monotonic() + self.step_s, ts))

    def recv(self) -> TimeStep:
        if not self._in_flight:
            raise RuntimeError("recv() has nothing to return: call async_reset() or send() first")
        return self._wait(*self._in_flight.popleft())

    def close(self) -> None:
        self._in_flight.clear()

    # -- internals ---------------------------------------------------------------------
    def _all_ids(self) -> np.ndarray:
        return np.arange(self.spec.num_envs, dtype=np.int32)

    def _begin_all(self) -> None:
        self._in_flight.clear()
        self._needs_reset[:] = True
        self._stats.begin()

    @staticmethod
    def _wait(ready_at: float, ts: TimeStep) -> TimeStep:
        delay = ready_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return ts

    def _advance(self, ids: np.ndarray, action: np.ndarray | None) -> TimeStep:
        """Step (or lazily reset) each env in ``ids``, all at once; ``action`` None only for reset rows."""
        if action is not None and len(action) != len(ids):
            raise ValueError(f"{len(action)} actions for {len(ids)} env ids")
        resetting = self._needs_reset[ids]
        if action is None and not resetting.all():
            raise ValueError("only reset rows may come without an action")
        reward = np.zeros(len(ids), np.float64)
        if action is not None and not resetting.all():
            stepped = ~resetting
            target = self._target[(self._start[ids] + self._elapsed[ids]) % TABLE_ROWS][stepped]
            act = action[stepped]
            if self.spec.action_kind == "discrete":
                reward[stepped] = (act.astype(np.int64) == target).astype(np.float64)
            else:
                act = np.clip(np.asarray(act, np.float64).reshape(len(act), -1), -1.0, 1.0)
                reward[stepped] = 1.0 - np.abs(act - target[:, None]).mean(axis=1)
        new = ids[resetting]
        if len(new):
            self._elapsed[new] = 0
            if self.random_length:
                self._length[new] = self._rng.integers(1, 2 * self.episode_length, len(new))
        old = ids[~resetting]
        self._elapsed[old] += 1
        terminated = np.zeros(len(ids), bool)
        terminated[~resetting] = self._elapsed[old] >= self._length[old]
        self._needs_reset[ids] = terminated
        obs = self._table[(self._start[ids] + self._elapsed[ids]) % TABLE_ROWS]
        episode_return, episode_length = self._stats.update(ids, reward, terminated, game_over=terminated)
        return TimeStep(
            obs=obs,
            reward=reward.astype(np.float32),
            terminated=terminated,
            truncated=np.zeros(len(ids), bool),
            env_id=ids,
            episode_return=episode_return,
            episode_length=episode_length,
        )


def make_synthetic(cfg: EnvConfig, seed: int) -> SyntheticVecEnv:
    """Factory for ``env.factory=envs.synthetic:make_synthetic`` (options in ``env.options``)."""
    if cfg.max_episode_steps:
        raise ValueError("the synthetic env takes its episode length from env.options.episode_length; leave "
                         "env.max_episode_steps at 0")
    return SyntheticVecEnv(cfg.num_envs, seed, batch_size=cfg.envs_per_recv, **cfg.options)


make_synthetic.options = OPTIONS  # names and types checked before launch (envs.problems)
make_synthetic.option_problems = synthetic_problems  # and values
