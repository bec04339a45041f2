"""gymnax (classic control, MinAtar, bsuite, misc) as a ``Family``: ``env.id=gymnax/<gymnax id>``.

``env.max_episode_steps`` sets gymnax's ``max_steps_in_episode``; ``env.options`` set other fields of the env's
``EnvParams`` (e.g. ``env.options.gravity=9.8`` for CartPole). Observations are float32; a time limit is a
truncation (gymnax 1.0 reports the two apart).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import EnvSpec, channels_from_shape


def _name(cfg: EnvConfig) -> str:
    return cfg.id.split("/", 1)[1]


def _params(env: Any, cfg: EnvConfig) -> Any:
    params = env.default_params
    fields = dict(cfg.options)
    if cfg.max_episode_steps:
        fields["max_steps_in_episode"] = cfg.max_episode_steps
    return params.replace(**fields) if fields else params


def problems(cfg: EnvConfig) -> list[str]:
    import gymnax

    name = _name(cfg)
    if name not in gymnax.registered_envs:
        return [f"env.id={cfg.id!r}: gymnax has no env {name!r}; its envs: {', '.join(gymnax.registered_envs)}"]
    env, params = gymnax.make(name)
    known = {f.name for f in dataclasses.fields(params)}
    unknown = sorted(set(cfg.options) - known)
    if unknown:
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; its options (EnvParams): "
                f"{', '.join(sorted(known))}"]
    return []


def spec_of(env_id: str, env: Any, params: Any, max_steps: int) -> EnvSpec:
    from gymnax.environments import spaces

    obs_space, action_space = env.observation_space(params), env.action_space(params)
    obs_shape = tuple(int(d) for d in obs_space.shape)
    common = dict(id=env_id, obs_shape=obs_shape, obs_dtype="float32", max_episode_steps=max_steps,
                  image_channels=channels_from_shape(obs_shape))
    if isinstance(action_space, spaces.Discrete):
        return EnvSpec(action_kind="discrete", num_actions=int(action_space.n), **common)
    if isinstance(action_space, spaces.Box):
        shape = tuple(int(d) for d in action_space.shape) or (1,)
        low = np.broadcast_to(np.asarray(action_space.low, np.float32), shape).ravel()
        high = np.broadcast_to(np.asarray(action_space.high, np.float32), shape).ravel()
        return EnvSpec(action_kind="continuous", action_shape=shape, action_low=tuple(map(float, low)),
                       action_high=tuple(map(float, high)), **common)
    raise ValueError(f"env.id={env_id!r}: its action space {type(action_space).__name__} is neither Discrete nor Box")


def family(cfg: EnvConfig) -> Family:
    import gymnax

    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env, _ = gymnax.make(_name(cfg))
    params = _params(env, cfg)
    spec = spec_of(cfg.id, env, params, int(getattr(params, "max_steps_in_episode", 0) or 0))
    scalar_action = spec.action_kind == "continuous" and not env.action_space(params).shape

    def reset(key: Any) -> Any:
        obs, state = env.reset_env(key, params)
        return jnp.asarray(obs, jnp.float32), state

    def step(key: Any, state: Any, action: Any) -> Any:
        if scalar_action:
            action = action[0]
        obs, state, reward, terminated, _ = env.step_env(key, state, action, params)
        truncated = env.is_truncated(state, params)
        return (jnp.asarray(obs, jnp.float32), state, jnp.asarray(reward, jnp.float32),
                jnp.asarray(terminated, bool), jnp.asarray(truncated, bool))

    return Family(spec, reset, step)
