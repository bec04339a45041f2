"""Plain gymnasium envs behind the VecEnv interface, with envpool's lazy autoreset.

Directly::

    env = GymnasiumVecEnv(lambda: gymnasium.make("CartPole-v1"), num_envs=4, seed=0)
    ts = env.reset()

or from a config, through the same seam as any user-defined env::

    EnvConfig(id="CartPole-v1", factory="envs.gym_adapter:make_gymnasium", max_episode_steps=200)

The envs are stepped one after another in this process, so this is for envs envpool lacks,
not for speed. Episode statistics report the env's own rewards (wrap the env yourself if you
want to learn from transformed rewards but report raw ones).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from envs.python_loop import PythonLoopVecEnv
from envs.spaces import ActionConverter, ObsConverter, spec_from_spaces
from srljax.config import EnvConfig


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


def make_gymnasium(cfg: EnvConfig, seed: int) -> GymnasiumVecEnv:
    """Factory for ``EnvConfig(factory="envs.gym_adapter:make_gymnasium")``: ``cfg.id`` is a gymnasium id.

    ``cfg.max_episode_steps > 0`` replaces the env's registered time limit. Atari-only options
    do not apply here.
    """
    options = {"max_episode_steps": cfg.max_episode_steps} if cfg.max_episode_steps > 0 else {}
    return GymnasiumVecEnv(
        functools.partial(gymnasium.make, cfg.id, **options),
        num_envs=cfg.num_envs,
        seed=seed,
        batch_size=cfg.envs_per_recv,
        image_channels=cfg.image_channels,
    )
