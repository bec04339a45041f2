"""Craftax (a 2-D Minecraft: gather, craft, fight, survive) as a ``Family``: ``env.id=craftax/<name>``, one of
``Craftax-Classic-Symbolic-v1``, ``Craftax-Classic-Pixels-v1``, ``Craftax-Symbolic-v1``, ``Craftax-Pixels-v1``.

Symbolic observations are craftax's own float32 vector (the local map one-hot, inventory, intrinsics; 1,345 floats
for Classic, 8,268 for Craftax); Pixels ones are an (H, W, 3) float image. 17 discrete actions (Classic), 43
(Craftax). The reward is craftax's: +1 per achievement unlocked, +-0.1 per health point gained or lost. Death (and in
Craftax, beating the final boss) is a termination; the time limit, ``env.max_episode_steps`` (0: craftax's
``max_timesteps``, 10,000 for Classic, 100,000 for Craftax), a truncation. ``env.options`` set other fields of the
game's ``EnvParams`` (e.g. ``day_length``, ``always_diamond``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import EnvSpec, channels_from_shape

NAMES = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")
NO_LIMIT = 2**31 - 1
"""``max_timesteps`` when asking craftax whether a state is over for a reason other than the time limit."""


def _name(cfg: EnvConfig) -> str:
    return cfg.id.split("/", 1)[1]


def _env(name: str) -> Any:
    from craftax.craftax_env import make_craftax_env_from_name

    return make_craftax_env_from_name(name, auto_reset=False)


def _options(params: Any) -> list[str]:
    return sorted(f.name for f in dataclasses.fields(params) if f.name not in ("max_timesteps", "fractal_noise_angles"))


def problems(cfg: EnvConfig) -> list[str]:
    name = _name(cfg)
    if name not in NAMES:
        return [f"env.id={cfg.id!r}: craftax has no env {name!r}; its envs: {', '.join(NAMES)}"]
    known = _options(_env(name).default_params)
    unknown = sorted(set(cfg.options) - set(known))
    if unknown:
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; its options (EnvParams): "
                f"{', '.join(known)} (the time limit is env.max_episode_steps)"]
    return []


def family(cfg: EnvConfig) -> Family:
    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env = _env(_name(cfg))
    params = env.default_params.replace(**cfg.options)
    if cfg.max_episode_steps:
        params = params.replace(max_timesteps=int(cfg.max_episode_steps))
    unlimited = params.replace(max_timesteps=NO_LIMIT)
    obs_shape = tuple(int(d) for d in env.observation_space(params).shape)
    spec = EnvSpec(id=cfg.id, obs_shape=obs_shape, obs_dtype="float32", action_kind="discrete",
                   num_actions=int(env.num_actions), max_episode_steps=int(params.max_timesteps),
                   image_channels=channels_from_shape(obs_shape) if len(obs_shape) == 3 else "")

    def reset(key: jax.Array) -> tuple[jax.Array, Any]:
        obs, state = env.reset_env(key, params)
        return jnp.asarray(obs, jnp.float32), state

    def step(key: jax.Array, state: Any, action: jax.Array) -> Any:
        obs, state, reward, _, _ = env.step_env(key, state, action, params)
        terminated = jnp.asarray(env.is_terminal(state, unlimited), bool)  # death or the boss, not the clock
        truncated = state.timestep >= params.max_timesteps
        return jnp.asarray(obs, jnp.float32), state, jnp.asarray(reward, jnp.float32), terminated, truncated

    return Family(spec, reset, step, costly_reset=True)  # a world generated per reset
