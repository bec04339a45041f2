"""jumanji (InstaDeep's puzzles, routing and packing: ``Snake-v1``, ``Game2048-v1``, ``Maze-v0``, ``Tetris-v0``,
``Knapsack-v1``, ``Minesweeper-v0``, ...) as a ``Family``: ``env.id=jumanji/<jumanji id>``.

The observation (a NamedTuple or dataclass of arrays) is flattened to one float32 vector, its leaves in jumanji's
order and named by their path (``obs_keys``: ``grid``, ``step_count``, ``action_mask``; ``agent_position/row``).
Where the env's ``action_mask`` flags every action it is the legal-action leaf (``EnvSpec.legal_actions``), so the
policy never picks an illegal move. Actions: a ``DiscreteArray`` is ``discrete``; a ``MultiDiscreteArray`` whose mask
covers every combination (Tetris: rotation x column, Minesweeper: row x column) is one ``discrete`` action over the
combinations, so the mask applies; any other ``MultiDiscreteArray`` is ``multi_discrete``; a bounded float array is
``continuous``; an env of several agents (RobotWarehouse, LevelBasedForaging) is one agent acting for all, paid the
sum of their rewards. A ``LAST`` step with discount 0 is a termination, with discount > 0 a truncation (jumanji's own
``time_limit``); ``env.max_episode_steps`` adds a time limit (a truncation). ``env.options`` are the env's constructor
arguments that are plain numbers or flags (Snake: ``num_rows``, ``num_cols``, ``time_limit``; Game2048:
``board_size``).
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import ACTION_MASK_KEY, EnvSpec

PLAIN = (int, float, bool, str)


def _name(cfg: EnvConfig) -> str:
    return cfg.id.split("/", 1)[1]


def _options(name: str) -> dict[str, Any]:
    """The constructor arguments of a plain type (and their defaults) of the class jumanji registers as ``name``."""
    from jumanji import registration

    entry = registration._REGISTRY[name]  # noqa: SLF001 - jumanji's registry has no public entry lookup
    module, cls = entry.entry_point.split(":")
    params = inspect.signature(getattr(__import__(module, fromlist=[cls]), cls).__init__).parameters
    return {k: p.default for k, p in params.items()
            if k != "self" and (isinstance(p.default, PLAIN) or (p.default is None and p.annotation in (
                "Optional[int]", "Optional[float]")))}


def problems(cfg: EnvConfig) -> list[str]:
    import jumanji

    name = _name(cfg)
    known = jumanji.registered_environments()
    if name not in known:
        return [f"env.id={cfg.id!r}: jumanji has no env {name!r}; its envs: {', '.join(known)}"]
    options = _options(name)
    unknown = sorted(set(cfg.options) - set(options))
    if unknown:
        takes = f"its options: {', '.join(sorted(options))}" if options else "it takes none"
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; {takes} "
                "(the time limit is env.max_episode_steps)"]
    try:
        _spec(cfg, jumanji.make(name, **cfg.options))
    except ValueError as error:
        return [str(error)]
    return []


def _leaves(tree: Any) -> list[tuple[str, Any]]:
    def name(path: tuple) -> str:
        return "/".join(str(getattr(p, "name", getattr(p, "key", getattr(p, "idx", p)))) for p in path)

    return [(name(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _spec(cfg: EnvConfig, env: Any) -> tuple[EnvSpec, tuple[int, ...]]:
    """The env's ``EnvSpec`` and, for a multi-discrete action folded into one discrete choice, its ``nvec``."""
    from jumanji import specs

    _, ts = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    leaves = _leaves(ts.observation)
    keys = tuple(k for k, _ in leaves)
    sizes = tuple(int(np.prod(leaf.shape)) for _, leaf in leaves)
    mask_shape = dict(leaves)[ACTION_MASK_KEY].shape if ACTION_MASK_KEY in keys else None
    limit = int(cfg.max_episode_steps or getattr(env, "time_limit", 0) or 0)
    common = dict(id=cfg.id, obs_shape=(sum(sizes),), obs_dtype="float32", max_episode_steps=limit, obs_keys=keys,
                  obs_key_sizes=sizes)
    action = env.action_spec
    if isinstance(action, specs.DiscreteArray):
        n = int(action.num_values)
        return EnvSpec(action_kind="discrete", num_actions=n, action_mask=mask_shape == (n,), **common), ()
    if isinstance(action, specs.MultiDiscreteArray):
        nvec = tuple(int(v) for v in np.asarray(action.num_values).ravel())
        if mask_shape == nvec:  # a flag per combination: one discrete choice, masked
            return EnvSpec(action_kind="discrete", num_actions=int(np.prod(nvec)), action_mask=True, **common), nvec
        return EnvSpec(action_kind="multi_discrete", action_shape=(len(nvec),), action_nvec=nvec, **common), ()
    if isinstance(action, specs.BoundedArray) and jnp.issubdtype(action.dtype, jnp.floating):
        shape = tuple(int(d) for d in action.shape) or (1,)
        low = np.broadcast_to(np.asarray(action.minimum, np.float32), shape).ravel()
        high = np.broadcast_to(np.asarray(action.maximum, np.float32), shape).ravel()
        return EnvSpec(action_kind="continuous", action_shape=(int(np.prod(shape)),), action_low=tuple(map(float, low)),
                       action_high=tuple(map(float, high)), **common), ()
    raise ValueError(f"env.id={cfg.id!r}: its action spec {type(action).__name__} {action.shape} is none of "
                     "DiscreteArray, MultiDiscreteArray or a bounded float array")


def family(cfg: EnvConfig) -> Family:
    import jumanji

    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env = jumanji.make(_name(cfg), **cfg.options)
    spec, nvec = _spec(cfg, env)
    action_shape = tuple(env.action_spec.shape)
    limit = int(cfg.max_episode_steps)

    def observe(obs: Any) -> jax.Array:
        return jnp.concatenate([jnp.asarray(leaf, jnp.float32).reshape(-1) for _, leaf in _leaves(obs)])

    def reset(key: jax.Array) -> tuple[jax.Array, Any]:
        state, ts = env.reset(key)
        return observe(ts.observation), (state, jnp.zeros((), jnp.int32))

    def step(key: jax.Array, inner: Any, action: jax.Array) -> Any:
        state, t = inner
        if nvec:
            action = jnp.stack(jnp.unravel_index(action, nvec)).astype(env.action_spec.dtype)
        elif spec.action_kind == "continuous":
            action = action.reshape(action_shape)
        state, ts = env.step(state, action)  # jumanji keeps its key in the state
        t = t + 1
        last = ts.step_type == 2  # StepType.LAST
        terminated = last & jnp.all(ts.discount == 0)
        truncated = (last & ~terminated) | ((t >= limit) if limit else False)
        reward = jnp.sum(jnp.asarray(ts.reward, jnp.float32))  # a team's rewards (one per agent): their sum
        return observe(ts.observation), (state, t), reward, terminated, truncated

    return Family(spec, reset, step)
