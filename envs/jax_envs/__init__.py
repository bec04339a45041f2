"""Environments that are JAX functions (gymnax, ...): one env seam, two faces.

    from envs import jax_envs
    env = jax_envs.make(EnvConfig(id="gymnax/CartPole-v1", num_envs=4))
    state, ts = env.reset(jax.random.PRNGKey(0))       # pure: jit it, vmap it, scan it
    state, ts = env.step(state, action)                  # TimeStep of jax arrays, leading axis num_envs

``JaxEnv.reset`` / ``step`` are pure functions of an ``EnvState`` (each env's own key inside), so the Anakin loop
(``srljax/loops/anakin.py``) compiles rollout and update into one program, and a checkpoint of the state resumes
every env exactly. The same env as a host ``VecEnv`` (``host.JaxVecEnv``, what ``envs.make`` returns for these ids)
serves evaluation, ``launch.play`` and the worker graph's actors.

Semantics are envpool's (``srljax.types.TimeStep``): autoreset is lazy (the step after a done ignores its action and
returns the next episode's first observation, reward 0, both flags False), ``episode_return`` / ``episode_length``
are set on the row that ends an episode, so the algorithms' updates read these trajectories as they read envpool's.

Multi-agent families (``jaxmarl/...``, ``jaxmarl_family.py``) give observations ``[N, F]`` per env (the agent axis,
``envs/multi_agent.py``) and actions ``[N]``; the batch adds the env axis in front as for any env.

Families (``srljax.config.env.JAX_FAMILIES``) are optional packages: ``pip install -e '.[jaxenvs]'``; a missing one is refused before
launch with the command that installs it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from srljax.config import EnvConfig
from srljax.config.env import JAX_FAMILIES, jax_family
from srljax.types import EnvSpec, TimeStep


class Family(NamedTuple):
    """One env of a family, unbatched and without autoreset: what a family module provides."""

    spec: EnvSpec  # num_envs / batch_size 1
    reset: Callable[[jax.Array], tuple[jax.Array, Any]]  # key -> (obs, inner state)
    step: Callable[[jax.Array, Any, jax.Array], tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]]
    """(key, inner, action) -> (obs, inner, reward, terminated, truncated); no reset inside."""
    symmetries: tuple[tuple[Any, Any], ...] = ()
    """the game's symmetries as index permutations ``(obs_index [D], action_index [A])``: the row ``obs[obs_index]``
    is the same position mirrored, where move ``action_index[a]`` is move ``a``'s image (connect four: left-right);
    a search algorithm trains on the images too (``algo.augment``)."""
    won: Callable[[Any], jax.Array] | None = None
    """inner state after the step that ended an episode -> whether it was won (games with an outcome: SMAX);
    None: the family reports none."""
    costly_reset: bool = False
    """its ``reset`` costs more than a step (craftax generates a world): ``JaxEnv.step`` then resets only the envs
    that are done (``JaxEnv.reset_slots`` at a time) instead of every env at every step."""


class EnvState(NamedTuple):
    """A batch of envs between steps (every leaf has the env axis first)."""

    inner: Any  # the family's own state
    done: jax.Array  # [B] bool: the last row ended an episode, so the next step resets
    episode_return: jax.Array  # [B] float32 so far
    episode_length: jax.Array  # [B] int32 so far
    key: jax.Array  # [B, 2] uint32: each env's own key


@dataclass(frozen=True)
class JaxEnv:
    """A batch of ``spec.num_envs`` envs of one family as pure functions (see the module docstring)."""

    spec: EnvSpec
    family: Family
    reset_slots: int = 0
    """0: every step computes a fresh start for every env and keeps it where the env was done (a ``select``: the
    cheapest form when a reset costs about a step, gymnax). K > 0: fresh starts only for the envs that are done, K at a
    time in a ``while_loop`` until each has its own (none computed on a step where no env is done). Both give every
    env the start its own key draws, so the two are the same envs step for step (tested on gymnax, bit for bit; on
    craftax one bench case differed, cause not found: bench/RESULTS.md, issue 39); ``make`` picks K for a
    family with ``costly_reset`` (``reset_slots_for``)."""

    def reset(self, key: jax.Array) -> tuple[EnvState, TimeStep]:
        n = self.spec.num_envs
        keys = jax.random.split(key, n)
        carry, reset_keys = jax.vmap(jax.random.split, out_axes=1)(keys)
        obs, inner = jax.vmap(self.family.reset)(reset_keys)
        false = jnp.zeros(n, bool)
        state = EnvState(inner, false, jnp.zeros(n, jnp.float32), jnp.zeros(n, jnp.int32), carry)
        return state, TimeStep(obs=self._obs(obs), reward=jnp.zeros(n, jnp.float32), terminated=false,
                               truncated=false, env_id=jnp.arange(n, dtype=jnp.int32),
                               episode_return=jnp.full(n, jnp.nan, jnp.float32),
                               episode_length=jnp.zeros(n, jnp.int32))

    def step(self, state: EnvState, action: jax.Array) -> tuple[EnvState, TimeStep]:
        fam = self.family

        def one(inner: Any, done: jax.Array, key: jax.Array, a: jax.Array) -> Any:
            key, k_step, k_reset = jax.random.split(key, 3)
            obs_s, inner_s, reward, terminated, truncated = fam.step(k_step, inner, a)
            if self.reset_slots:  # the done envs' starts come after the vmap (``_reset_done``)
                return obs_s, inner_s, reward, terminated, truncated, key, k_reset
            obs_r, inner_r = fam.reset(k_reset)
            pick = lambda r, s: jnp.where(done, r, s)  # noqa: E731 - the reset row after a done
            return (jax.tree.map(pick, obs_r, obs_s), jax.tree.map(pick, inner_r, inner_s), reward, terminated,
                    truncated, key, k_reset)

        obs, inner, reward, terminated, truncated, key, k_reset = jax.vmap(one)(state.inner, state.done, state.key,
                                                                                action)
        if self.reset_slots:
            obs, inner = self._reset_done(state.done, k_reset, obs, inner)
        done = state.done
        reward = jnp.where(done, 0.0, reward).astype(jnp.float32)
        terminated, truncated = ~done & terminated, ~done & truncated & ~terminated
        ret = jnp.where(done, 0.0, state.episode_return + reward)
        length = jnp.where(done, 0, state.episode_length + 1)
        ended = terminated | truncated
        ts = TimeStep(obs=self._obs(obs), reward=reward, terminated=terminated, truncated=truncated,
                      env_id=jnp.arange(self.spec.num_envs, dtype=jnp.int32),
                      episode_return=jnp.where(ended, ret, jnp.nan), episode_length=jnp.where(ended, length, 0))
        return EnvState(inner, ended, ret, length, key), ts

    def _reset_done(self, done: jax.Array, keys: jax.Array, obs: Any, inner: Any) -> tuple[Any, Any]:
        """Write a fresh start (from that env's own reset key) over each done env's stepped ``obs`` / ``inner``,
        ``reset_slots`` envs per pass of a ``while_loop`` that runs ``ceil(done envs / K)`` passes (none when no env
        is done)."""
        n, k = self.spec.num_envs, self.reset_slots
        count = jnp.sum(done, dtype=jnp.int32)
        order = jnp.nonzero(done, size=n + k, fill_value=n)[0]  # the done envs' indices first, then n (dropped)

        def body(c: tuple[jax.Array, Any, Any]) -> tuple[jax.Array, Any, Any]:
            i, obs, inner = c
            idx = lax.dynamic_slice(order, (i * k,), (k,))
            obs_r, inner_r = jax.vmap(self.family.reset)(keys[jnp.minimum(idx, n - 1)])
            put = lambda a, r: a.at[idx].set(r.astype(a.dtype), mode="drop")  # noqa: E731 - index n: dropped
            return i + 1, jax.tree.map(put, obs, obs_r), jax.tree.map(put, inner, inner_r)

        _, obs, inner = lax.while_loop(lambda c: c[0] * k < count, body, (jnp.int32(0), obs, inner))
        return obs, inner

    def episode_won(self, state: EnvState) -> jax.Array:
        """[B] float32 after a ``step``: 1.0 / 0.0 where that step ended an episode the family calls won / not won,
        NaN elsewhere and for families without outcomes (``Family.won``); the Anakin loop's ``win_rate``."""
        if self.family.won is None:
            return jnp.full(self.spec.num_envs, jnp.nan, jnp.float32)
        won = jax.vmap(self.family.won)(state.inner).astype(jnp.float32)
        return jnp.where(state.done, won, jnp.nan)

    def _obs(self, obs: jax.Array) -> jax.Array:
        return obs.astype(self.spec.obs_dtype)


def _family_module(env_id: str) -> Any:
    module, package = JAX_FAMILIES[jax_family(env_id)]
    if importlib.util.find_spec(package) is None:
        raise ImportError(f"env.id={env_id!r} needs the {package} package, which is not installed; install the JAX env "
                          "families with: pip install -e '.[jaxenvs]'")
    return importlib.import_module(module)


def make(cfg: EnvConfig) -> JaxEnv:
    """The JAX env ``cfg`` names (``family/name``), batched ``cfg.num_envs`` wide."""
    family = _family_module(cfg.id).family(cfg)
    spec = dataclasses.replace(family.spec, num_envs=cfg.num_envs, batch_size=cfg.num_envs)
    return JaxEnv(spec, family, reset_slots_for(family, cfg.num_envs))


def reset_slots_for(family: Family, num_envs: int) -> int:
    """``JaxEnv.reset_slots`` for ``num_envs`` of ``family``: 0 (reset by select) unless its reset is costly, then
    one slot per 32 envs (a pass resets that many; bench/RESULTS.md, issue 39, has the measurement)."""
    return max(1, num_envs // 32) if family.costly_reset else 0


def players(cfg: EnvConfig) -> int:
    """Players taking turns in one of ``cfg``'s games (``EnvSpec.players``), found without building the batch."""
    return int(getattr(_family_module(cfg.id), "players", lambda c: 1)(cfg))


def problems(cfg: EnvConfig) -> list[str]:
    """What would stop ``make(cfg)``, found without stepping it: a missing family package, an unknown name, options
    the family does not take, an env ring (JAX envs step in lockstep)."""
    if cfg.batch_size and cfg.batch_size != cfg.num_envs:
        return [f"env.batch_size={cfg.batch_size}: {cfg.id} is a JAX env, stepped all {cfg.num_envs} at once; "
                "leave env.batch_size=0"]
    try:
        module = _family_module(cfg.id)
    except ImportError as error:
        return [str(error)]
    return list(module.problems(cfg))
