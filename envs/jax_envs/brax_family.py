"""brax locomotion (``brax/ant``, ``brax/halfcheetah``, ``brax/hopper``, ...) as a ``Family``: ``env.id=brax/<name>``.

``env.options.backend`` picks brax's physics (``positional`` by default; ``generalized``, ``spring``, ``mjx``);
``env.max_episode_steps`` is the time limit (1,000 by default, brax's ``episode_length``), a truncation; brax's own
``done`` (an unhealthy robot) is a termination. Actions are in [-1, 1]. On a CPU brax steps slowly (bench/RESULTS.md,
"Anakin"): it is meant for accelerators.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import EnvSpec

BACKENDS = ("positional", "generalized", "spring", "mjx")
DEFAULT_EPISODE = 1000


def problems(cfg: EnvConfig) -> list[str]:
    from brax import envs

    name = cfg.id.split("/", 1)[1]
    known = sorted(envs._envs)  # noqa: SLF001 - brax's registry has no public listing
    if name not in known:
        return [f"env.id={cfg.id!r}: brax has no env {name!r}; its envs: {', '.join(known)}"]
    unknown = sorted(set(cfg.options) - {"backend"})
    if unknown:
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; its options: backend"]
    if cfg.options.get("backend", "positional") not in BACKENDS:
        return [f"env.options.backend={cfg.options['backend']!r}: pick one of {', '.join(BACKENDS)}"]
    return []


def family(cfg: EnvConfig) -> Family:
    from brax import envs

    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env = envs.get_environment(cfg.id.split("/", 1)[1], backend=cfg.options.get("backend", "positional"))
    limit = cfg.max_episode_steps or DEFAULT_EPISODE
    n = int(env.action_size)
    spec = EnvSpec(id=cfg.id, obs_shape=(int(env.observation_size),), obs_dtype="float32", action_kind="continuous",
                   action_shape=(n,), action_low=(-1.0,) * n, action_high=(1.0,) * n, max_episode_steps=limit)

    def reset(key: Any) -> Any:
        state = env.reset(key)
        return state.obs, (state, jnp.zeros((), jnp.int32))

    def step(key: Any, inner: Any, action: Any) -> Any:
        state, t = inner
        state = env.step(state, jnp.clip(action, -1.0, 1.0))
        t = t + 1
        return state.obs, (state, t), jnp.asarray(state.reward, jnp.float32), jnp.asarray(state.done) > 0, t >= limit

    return Family(spec, reset, step)
