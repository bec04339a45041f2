"""Plain gymnasium envs behind the VecEnv interface, with envpool's lazy autoreset.

Directly::

    env = GymnasiumVecEnv(lambda: gymnasium.make("CartPole-v1"), num_envs=4, seed=0)
    ts = env.reset()

or from a config, through the same seam as any user-defined env::

    EnvConfig(id="CartPole-v1", factory="envs.gym_adapter:make_gymnasium", max_episode_steps=200)

``GymnasiumVecEnv`` steps the copies one after another in this process: best for fast envs (CartPole:
137k steps/s here, 0.16x that through 16 worker processes, ``bench/python_envs.py``). A slow Python env
runs its copies in parallel in worker processes, with the same semantics (``envs/subproc.py``)::

    env = SubprocGymnasiumVecEnv(functools.partial(MyEnv, level=3), num_envs=16, seed=0)   # one process per env
    EnvConfig(id="Acrobot-v1", factory="envs.gym_adapter:make_gymnasium", options={"processes": 16})

(16 copies of an env whose step waits 2 ms: 11.9x the in-process loop on 2 cores). Pass an env
constructor a fresh process can import (a module-level class or function, or a ``functools.partial`` of
one), not a lambda. Episode statistics report the env's own rewards (wrap the env yourself if you want to
learn from transformed rewards but report raw ones).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from envs.options import with_defaults
from envs.python_loop import PythonLoopVecEnv
from envs.spaces import ActionConverter, ObsConverter, spec_from_spaces
from envs.subproc import SubprocVecEnv
from srljax.config import EnvConfig

OPTIONS: dict[str, Any] = {"processes": 0}
"""``env.options`` of ``make_gymnasium``: ``processes`` 0 steps the copies in this process (fast envs); N > 0
steps them in N worker processes (at most one per env; slow envs)."""


class GymnasiumVecEnv(PythonLoopVecEnv):
    """``num_envs`` copies of ``make_env()``; env ``i`` is first reset with ``seed + i``."""

    def __init__(
        self,
        make_env: Callable[[], gymnasium.Env],
        num_envs: int,
        seed: int,
        batch_size: int | None = None,
        image_channels: str = "auto",
    ):
        self._envs = [make_env() for _ in range(num_envs)]
        first = self._envs[0]
        time_limit = first.spec.max_episode_steps if first.spec is not None else None
        super().__init__(
            spec_from_spaces(
                first.spec.id if first.spec is not None else type(first.unwrapped).__name__,
                first.observation_space,
                first.action_space,
                num_envs=num_envs,
                batch_size=batch_size or num_envs,
                max_episode_steps=time_limit or 0,
                image_channels_declared=image_channels,
            )
        )
        self._to_env_action = ActionConverter(first.action_space)
        self._to_agent_obs = ObsConverter(first.observation_space)
        # Seed only the first reset of each env; later resets continue its random stream, as
        # envpool does, so episodes differ.
        self._next_seed: list[int | None] = [seed + i for i in range(num_envs)]

    def _reset_env(self, index: int) -> np.ndarray:
        obs, _ = self._envs[index].reset(seed=self._next_seed[index])
        self._next_seed[index] = None
        return self._to_agent_obs.one(obs)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        action = self._to_env_action(action)
        env_action = int(action) if self._to_env_action.scalar else action
        obs, reward, terminated, truncated, _ = self._envs[index].step(env_action)
        return self._to_agent_obs.one(obs), float(reward), bool(terminated), bool(truncated)

    def close(self) -> None:
        super().close()
        for env in self._envs:
            env.close()


class SubprocGymnasiumVecEnv(SubprocVecEnv):
    """``GymnasiumVecEnv``'s copies of ``make_env()`` in ``processes`` worker processes (default one per env)."""

    def __init__(
        self,
        make_env: Callable[[], gymnasium.Env],
        num_envs: int,
        seed: int,
        batch_size: int | None = None,
        processes: int | None = None,
        image_channels: str = "auto",
    ):
        super().__init__(functools.partial(GymnasiumVecEnv, make_env, image_channels=image_channels), num_envs, seed,
                         batch_size, processes)


def make_gymnasium(cfg: EnvConfig, seed: int) -> GymnasiumVecEnv | SubprocGymnasiumVecEnv:
    """Factory for ``EnvConfig(factory="envs.gym_adapter:make_gymnasium")``: ``cfg.id`` is a gymnasium id.

    ``cfg.max_episode_steps > 0`` replaces the env's registered time limit; ``env.options.processes=N``
    steps the copies in N worker processes (``OPTIONS``). Atari-only options do not apply here.
    """
    options = {"max_episode_steps": cfg.max_episode_steps} if cfg.max_episode_steps > 0 else {}
    make_env = functools.partial(gymnasium.make, cfg.id, **options)
    processes = with_defaults(cfg.options, OPTIONS)["processes"]
    if processes > 0:
        return SubprocGymnasiumVecEnv(make_env, cfg.num_envs, seed, cfg.envs_per_recv, processes, cfg.image_channels)
    return GymnasiumVecEnv(make_env, num_envs=cfg.num_envs, seed=seed, batch_size=cfg.envs_per_recv,
                           image_channels=cfg.image_channels)


def gymnasium_option_problems(options: dict[str, Any]) -> list[str]:
    """Value problems of type-checked options (``envs.options.option_problems`` checks names and types)."""
    processes = options.get("processes", 0)
    return [f"env.options.processes={processes} must be >= 0 (0: in this process)"] if processes < 0 else []


make_gymnasium.options = OPTIONS  # names and types checked before launch (envs.problems)
make_gymnasium.option_problems = gymnasium_option_problems
