"""Gymnasium spaces -> ``EnvSpec``, and agent actions -> what an env accepts.

Shared by the envpool wrapper and the gymnasium adapter (envpool exposes gymnasium spaces)::

    spec = spec_from_spaces("HalfCheetah-v4", env.observation_space, env.action_space,
                            num_envs=8, batch_size=8, max_episode_steps=1000)
    to_env = ActionConverter(env.action_space)
    env.step(to_env(agent_action))        # discrete -> int32; continuous -> clipped, env dtype
"""

from __future__ import annotations

import gymnasium
import numpy as np

from srljax.types import EnvSpec


def observation_dtype(space: gymnasium.spaces.Box) -> np.dtype:
    """float observations travel as float32 (half the bytes of float64); uint8 images stay uint8."""
    return np.dtype(np.float32) if np.issubdtype(space.dtype, np.floating) else np.dtype(space.dtype)


def spec_from_spaces(
    env_id: str,
    observation_space: gymnasium.Space,
    action_space: gymnasium.Space,
    num_envs: int,
    batch_size: int,
    max_episode_steps: int,
) -> EnvSpec:
    """Describe one env's spaces; raise ValueError for spaces the algorithms cannot handle."""
    if not isinstance(observation_space, gymnasium.spaces.Box):
        raise ValueError(
            f"{env_id}: observation space {observation_space} is not supported (only Box arrays); "
            "flatten it in your own env and plug that in with EnvConfig.factory"
        )
    common = dict(
        id=env_id,
        obs_shape=tuple(int(d) for d in observation_space.shape),
        obs_dtype=observation_dtype(observation_space).name,
        num_envs=num_envs,
        batch_size=batch_size,
        max_episode_steps=max(0, int(max_episode_steps or 0)),
    )
    if isinstance(action_space, gymnasium.spaces.Discrete):
        if int(action_space.start) != 0:
            raise ValueError(f"{env_id}: Discrete action space starting at {action_space.start} is not supported")
        return EnvSpec(action_kind="discrete", num_actions=int(action_space.n), **common)
    if isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1:
        return EnvSpec(
            action_kind="continuous",
            action_shape=(int(action_space.shape[0]),),
            action_low=tuple(float(x) for x in action_space.low),
            action_high=tuple(float(x) for x in action_space.high),
            **common,
        )
    raise ValueError(
        f"{env_id}: action space {action_space} is not supported (Discrete or a 1-D Box only); "
        "wrap your env and plug it in with EnvConfig.factory"
    )


class ActionConverter:
    """Turn agent actions (int32 indices, or float32 vectors) into what the env expects.

    Continuous actions are clipped to the bounds: a Gaussian policy samples outside them, and
    envpool MuJoCo, while clamping the control it simulates, charges the control cost on the
    unclipped action (HalfCheetah: action 5.0 costs 25x what 1.0 does).
    """

    def __init__(self, action_space: gymnasium.Space):
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        if not self.discrete:
            self._low = np.asarray(action_space.low, np.float64)
            self._high = np.asarray(action_space.high, np.float64)
            self._dtype = np.dtype(action_space.dtype)

    def __call__(self, action: np.ndarray) -> np.ndarray:
        if self.discrete:
            return np.asarray(action, np.int32)
        return np.clip(np.asarray(action, np.float64), self._low, self._high).astype(self._dtype)
