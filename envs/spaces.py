"""Gymnasium spaces -> ``EnvSpec``, env observations -> what the agent sees, agent actions -> what the env takes.

Shared by the envpool wrapper and the gymnasium adapter (envpool exposes gymnasium spaces)::

    spec = spec_from_spaces("HalfCheetah-v4", env.observation_space, env.action_space,
                            num_envs=8, batch_size=8, max_episode_steps=1000)
    obs = ObsConverter(env.observation_space)(raw_obs)        # Box: as is (float -> float32); Dict: one vector
    env.step(ActionConverter(env.action_space)(agent_action))  # discrete -> int32; continuous -> clipped

Observations: ``Box`` of any shape (a 3-D ``Box`` is an image, channels first or last detected by shape or
declared with ``env.image_channels``); ``Dict`` (nested too) flattened to one float32 vector in key order
(``EnvSpec.obs_keys``, ``obs_key_sizes``, ``unflatten_obs`` give the parts back), a leaf named ``action_mask``
flagging the legal actions (``EnvSpec.legal_actions``; the built-in networks mask the rest). Actions:
``Discrete``, 1-D ``MultiDiscrete`` (``EnvSpec.action_nvec``) and 1-D ``Box``; Tuple and Dict actions are
refused with a message saying how to plug such an env in.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium
import numpy as np

from srljax.types import ACTION_MASK_KEY, EnvSpec, channels_from_shape

ImageChannels = Literal["auto", "first", "last"]


def observation_dtype(space: gymnasium.Space) -> np.dtype:
    """float observations travel as float32 (half the bytes of float64); uint8 images stay uint8; a Dict
    observation is one float32 vector."""
    if isinstance(space, gymnasium.spaces.Dict):
        return np.dtype(np.float32)
    return np.dtype(np.float32) if np.issubdtype(space.dtype, np.floating) else np.dtype(space.dtype)


def _leaves(space: gymnasium.Space, prefix: str = "") -> list[tuple[str, gymnasium.Space]]:
    """A Dict space's leaves in key order, nested keys joined with ``/``."""
    if isinstance(space, gymnasium.spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _leaves(sub, f"{prefix}{key}/")]
    return [(prefix.rstrip("/"), space)]


def _leaf_size(env_id: str, key: str, space: gymnasium.Space) -> int:
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.n)
    if isinstance(space, (gymnasium.spaces.Box, gymnasium.spaces.MultiBinary)):
        return int(np.prod(space.shape, dtype=np.int64))
    raise ValueError(f"{env_id}: observation key {key!r} is a {type(space).__name__} space; a Dict observation's "
                     "leaves must be Box, MultiBinary or Discrete arrays (flatten the rest in your own env, "
                     "EnvConfig.factory)")


def image_channels(env_id: str, obs_shape: tuple[int, ...], declared: ImageChannels = "auto") -> str:
    """``"first"`` or ``"last"`` for a 3-D (image) observation, ``""`` for any other; ValueError when the shape
    does not say and nothing was declared."""
    if len(obs_shape) != 3:
        return ""
    if declared in ("first", "last"):
        return declared
    if detected := channels_from_shape(obs_shape):
        return detected
    raise ValueError(f"{env_id}: image observation {obs_shape}: its shape does not say which axis holds the channels; "
                     "declare it with env.image_channels=first (C, H, W) or env.image_channels=last (H, W, C)")


def spec_from_spaces(
    env_id: str,
    observation_space: gymnasium.Space,
    action_space: gymnasium.Space,
    num_envs: int,
    batch_size: int,
    max_episode_steps: int,
    image_channels_declared: ImageChannels = "auto",
) -> EnvSpec:
    """Describe one env's spaces; raise ValueError for spaces the algorithms cannot handle."""
    if isinstance(observation_space, gymnasium.spaces.Dict):
        leaves = _leaves(observation_space)
        sizes = tuple(_leaf_size(env_id, key, space) for key, space in leaves)
        obs = dict(obs_shape=(sum(sizes),), obs_keys=tuple(key for key, _ in leaves), obs_key_sizes=sizes)
    elif isinstance(observation_space, gymnasium.spaces.Box):
        shape = tuple(int(d) for d in observation_space.shape)
        obs = dict(obs_shape=shape, image_channels=image_channels(env_id, shape, image_channels_declared))
    else:
        raise ValueError(
            f"{env_id}: observation space {observation_space} is not supported (Box arrays, or a Dict of them); "
            "flatten it in your own env and plug that in with EnvConfig.factory"
        )
    common = dict(
        id=env_id,
        obs_dtype=observation_dtype(observation_space).name,
        num_envs=num_envs,
        batch_size=batch_size,
        max_episode_steps=max(0, int(max_episode_steps or 0)),
        **obs,
    )
    if ACTION_MASK_KEY in obs.get("obs_keys", ()):  # legal-action flags: the algorithms mask illegal actions out
        size = obs["obs_key_sizes"][obs["obs_keys"].index(ACTION_MASK_KEY)]
        if not isinstance(action_space, gymnasium.spaces.Discrete) or int(action_space.n) != size:
            raise ValueError(f"{env_id}: observation key {ACTION_MASK_KEY!r} ({size} flags) is read as the legal "
                             f"actions, which needs a Discrete action space of {size} actions; the actions are "
                             f"{action_space}: rename the key or match the action space")
        common["action_mask"] = True
    if isinstance(action_space, gymnasium.spaces.Discrete):
        if int(action_space.start) != 0:
            raise ValueError(f"{env_id}: Discrete action space starting at {action_space.start} is not supported")
        return EnvSpec(action_kind="discrete", num_actions=int(action_space.n), **common)
    if isinstance(action_space, gymnasium.spaces.MultiDiscrete) and len(action_space.shape) == 1:
        if np.any(np.asarray(action_space.start) != 0):
            raise ValueError(f"{env_id}: MultiDiscrete action space starting at {action_space.start} is not supported")
        nvec = tuple(int(n) for n in action_space.nvec)
        return EnvSpec(action_kind="multi_discrete", action_nvec=nvec, action_shape=(len(nvec),), **common)
    if isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1:
        return EnvSpec(
            action_kind="continuous",
            action_shape=(int(action_space.shape[0]),),
            action_low=tuple(float(x) for x in action_space.low),
            action_high=tuple(float(x) for x in action_space.high),
            **common,
        )
    raise ValueError(
        f"{env_id}: action space {action_space} is not supported (Discrete, a 1-D MultiDiscrete or a 1-D Box); "
        "for Tuple or Dict actions wrap your env so it takes one of those, and plug it in with EnvConfig.factory"
    )


class ObsConverter:
    """Env observations (a batch, leading axis B) -> the agent's: float Box -> float32, Dict -> flat float32."""

    def __init__(self, observation_space: gymnasium.Space):
        self._leaves = _leaves(observation_space) if isinstance(observation_space, gymnasium.spaces.Dict) else None
        self._dtype = observation_dtype(observation_space)

    def __call__(self, obs: Any) -> np.ndarray:
        return self._convert(obs, batched=True)

    def one(self, obs: Any) -> np.ndarray:
        """One env's observation (no leading axis)."""
        return self._convert(obs, batched=False)

    def _convert(self, obs: Any, batched: bool) -> np.ndarray:
        if self._leaves is None:
            return np.asarray(obs, self._dtype)
        parts = []
        for key, space in self._leaves:
            value = obs
            for name in key.split("/"):
                value = value[name]
            value = np.asarray(value)
            if isinstance(space, gymnasium.spaces.Discrete):
                value = np.eye(int(space.n), dtype=np.float32)[value.astype(np.int64) - int(space.start)]
            parts.append(value.reshape((value.shape[0] if batched else 1, -1)).astype(np.float32))
        flat = np.concatenate(parts, axis=1)
        return flat if batched else flat[0]


def unflatten_obs(obs: Any, spec: EnvSpec) -> dict[str, Any]:
    """A flattened Dict observation ``[..., D]`` -> ``{key: [..., size]}`` (numpy or jax), by ``spec.obs_keys``."""
    out, start = {}, 0
    for key, size in zip(spec.obs_keys, spec.obs_key_sizes):
        out[key] = obs[..., start:start + size]
        start += size
    return out


class ActionConverter:
    """Turn agent actions (int32 indices, or float32 vectors) into what the env expects.

    Continuous actions are clipped to the bounds: a Gaussian policy samples outside them, and
    envpool MuJoCo, while clamping the control it simulates, charges the control cost on the
    unclipped action (HalfCheetah: action 5.0 costs 25x what 1.0 does).
    """

    def __init__(self, action_space: gymnasium.Space):
        self.discrete = isinstance(action_space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete))
        self.scalar = isinstance(action_space, gymnasium.spaces.Discrete)
        """one env's action is a plain int (``Discrete``), not an array."""
        if not self.discrete:
            self._low = np.asarray(action_space.low, np.float64)
            self._high = np.asarray(action_space.high, np.float64)
            self._dtype = np.dtype(action_space.dtype)

    def __call__(self, action: np.ndarray) -> np.ndarray:
        if self.discrete:
            return np.asarray(action, np.int32)
        return np.clip(np.asarray(action, np.float64), self._low, self._high).astype(self._dtype)
