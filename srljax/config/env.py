"""``EnvConfig``: which environment an actor steps, and how many copies (``envs/`` builds it)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

JAX_FAMILIES = {"gymnax": ("envs.jax_envs.gymnax_family", "gymnax"), "brax": ("envs.jax_envs.brax_family", "brax"),
                "pgx": ("envs.jax_envs.pgx_family", "pgx"), "jumanji": ("envs.jax_envs.jumanji_family", "jumanji"),
                "craftax": ("envs.jax_envs.craftax_family", "craftax"),
                "xminigrid": ("envs.jax_envs.xminigrid_family", "xminigrid"),
                "jaxmarl": ("envs.jax_envs.jaxmarl_family", "jaxmarl")}
"""JAX env families by id prefix (``gymnax/CartPole-v1``) -> (the module with ``family(env_config)`` and
``problems(env_config)``, the package it needs); ``envs/jax_envs`` builds them."""


def jax_family(env_id: str) -> str:
    """The JAX family an env id names (``gymnax/CartPole-v1`` -> ``gymnax``), or ``""`` (an envpool id)."""
    prefix = env_id.split("/", 1)[0] if "/" in env_id else ""
    return prefix if prefix in JAX_FAMILIES else ""


@dataclass(frozen=True)
class EnvConfig:
    """Which environment one actor steps, and how many copies."""

    id: str = "CartPole-v1"
    """envpool task id (``Pong-v5``, ``HalfCheetah-v4``, ``CartPole-v1``, ...), or a JAX env's
    ``family/name`` (``gymnax/CartPole-v1``, ``gymnax/Breakout-MinAtar``, ``pgx/connect_four``, ``jumanji/Snake-v1``,
    ``craftax/Craftax-Classic-Symbolic-v1``, ``xminigrid/MiniGrid-Empty-8x8``, ``jaxmarl/smax:3m``; ``JAX_FAMILIES``)."""
    num_envs: int = 8
    """environments owned by one actor (one envpool instance)."""
    batch_size: int = 0
    """environments returned per ``recv``; 0 means ``num_envs`` (sync). Smaller: async env ring."""
    num_threads: int = 0
    """envpool worker threads; 0 lets envpool choose."""
    max_episode_steps: int = 0
    """time limit in agent steps; 0 keeps the env's default (Atari: 27,000; MuJoCo: 1,000)."""
    factory: str = ""
    """user-defined env: ``"package.module:make_fn"``, called as ``make_fn(env_config, seed)``
    and returning an object with the VecEnv interface (see ``envs/base.py``)."""
    image_channels: str = "auto"
    """which axis of an image (3-D) observation holds its channels: ``first`` (C, H, W, envpool Atari), ``last``
    (H, W, C, envpool Football) or ``auto``: from the shape (the axis of size <= 4), refused when it does not say."""
    obs_mask: tuple[int, ...] = ()
    """keep only these indices of the flattened observation (any env), e.g. ``(0, 2)``: CartPole without
    its velocities, a partially observable task; ``()`` keeps everything."""
    options: dict[str, Any] = field(default_factory=dict)
    """the env family's own options, checked by the family before launch (``envs.problems``) and filled with
    its defaults when the env is built: envpool Atari games take ``episodic_life``, ``reward_clip``,
    ``repeat_action_probability``, ``stack_num``, ``img_height``, ``img_width``, ``noop_max``,
    ``full_action_space`` (``envs/atari.py``); a user's ``factory`` declares its own (``make_fn.options``,
    ``envs/options.py``). On the command line: ``env.options.reward_clip=false``."""

    def __hash__(self) -> int:  # ``options`` is a dict: hash the whole config by value
        return hash(json.dumps(dataclasses.asdict(self), sort_keys=True, default=str))

    @property
    def is_jax(self) -> bool:
        """A JAX env (``envs/jax_envs``): stepped inside the compiled program on the Anakin path."""
        return not self.factory and bool(jax_family(self.id))

    @property
    def envs_per_recv(self) -> int:
        return self.batch_size or self.num_envs

    @property
    def is_async(self) -> bool:
        return self.envs_per_recv < self.num_envs
