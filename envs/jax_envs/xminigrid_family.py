"""XLand-MiniGrid's MiniGrid tasks (``MiniGrid-Empty-8x8``, ``MiniGrid-DoorKey-5x5``, ``MiniGrid-FourRooms``, ...) as
a ``Family``: ``env.id=xminigrid/<xminigrid id>``.

The observation is the agent's egocentric view (``view_size`` x ``view_size`` cells, each a tile and a colour), one-hot
per cell (13 tiles + 12 colours) and flattened to one float32 vector. Six discrete actions (forward, turn left, turn
right, pick up, put down, toggle). A success pays ``1 - 0.9 * steps / max_steps`` and ends the episode (a termination);
the time limit, ``env.max_episode_steps`` (0: xminigrid's own, ``4 * height * width`` for most tasks), is a
truncation. ``env.options`` set the task's ``EnvParams``: ``height``, ``width`` (the grid) and ``view_size`` (the
agent's view, odd). The XLand-MiniGrid meta-RL ids are refused: they need a benchmark's rulesets, which xminigrid
downloads as pickles and this family does not load.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import EnvSpec

OPTIONS = ("height", "width", "view_size")


def _name(cfg: EnvConfig) -> str:
    return cfg.id.split("/", 1)[1]


def _tasks() -> list[str]:
    import xminigrid

    return [n for n in xminigrid.registered_environments() if n.startswith("MiniGrid-")]


def _build(cfg: EnvConfig) -> tuple[Any, Any]:
    from xminigrid import registration

    entry = registration._REGISTRY[_name(cfg)]  # noqa: SLF001 - the task's own sizes, so max_steps follows options
    env = registration.load(entry.entry_point)()
    params = env.default_params(**{**entry.kwargs, **cfg.options})
    if cfg.max_episode_steps:
        params = params.replace(max_steps=int(cfg.max_episode_steps))
    return env, params


def problems(cfg: EnvConfig) -> list[str]:
    name = _name(cfg)
    if name.startswith("XLand-MiniGrid"):
        return [f"env.id={cfg.id!r}: the XLand-MiniGrid tasks need a benchmark's rulesets (downloaded pickles), which "
                f"this family does not load; pick a MiniGrid task: {', '.join(_tasks())}"]
    if name not in _tasks():
        return [f"env.id={cfg.id!r}: xminigrid has no task {name!r}; its tasks: {', '.join(_tasks())}"]
    unknown = sorted(set(cfg.options) - set(OPTIONS))
    if unknown:
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; its options: {', '.join(OPTIONS)} "
                "(the time limit is env.max_episode_steps)"]
    bad = [f"{k}={v!r}" for k, v in cfg.options.items() if not isinstance(v, int) or isinstance(v, bool) or v < 3]
    if bad:
        return [f"env.options {', '.join(bad)}: height, width and view_size are whole numbers >= 3"]
    if cfg.options.get("view_size", 3) % 2 == 0:
        return [f"env.options.view_size={cfg.options['view_size']}: the agent's view must be odd (it sits in the middle)"]
    return []


def family(cfg: EnvConfig) -> Family:
    from xminigrid.core.constants import NUM_COLORS, NUM_TILES

    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env, params = _build(cfg)
    view = int(params.view_size)
    size = view * view * (NUM_TILES + NUM_COLORS)
    spec = EnvSpec(id=cfg.id, obs_shape=(size,), obs_dtype="float32", action_kind="discrete",
                   num_actions=int(env.num_actions(params)), max_episode_steps=int(params.max_steps))

    def observe(obs: jax.Array) -> jax.Array:
        tiles = jax.nn.one_hot(obs[..., 0], NUM_TILES, dtype=jnp.float32)
        colors = jax.nn.one_hot(obs[..., 1], NUM_COLORS, dtype=jnp.float32)
        return jnp.concatenate([tiles, colors], axis=-1).reshape(-1)

    def reset(key: jax.Array) -> tuple[jax.Array, Any]:
        ts = env.reset(params, key)
        return observe(ts.observation), ts

    def step(key: jax.Array, ts: Any, action: jax.Array) -> Any:
        ts = env.step(params, ts, action)  # xminigrid draws from the key in its own state
        last = ts.step_type == 2  # StepType.LAST
        terminated = last & (ts.discount == 0)
        return observe(ts.observation), ts, jnp.asarray(ts.reward, jnp.float32), terminated, last & ~terminated

    return Family(spec, reset, step)
