"""The Anakin program of MuZero (``algos/muzero.py``): every env's move searched over the learned model, the rows kept
in a replay of trajectories on the device, windows of them sampled for each update, compiled together.

    program = MuZeroProgram(env, algo, num_steps=16, max_iterations=64, capacity=100_000)
    carry = program.start(train_state, env_key, act_key)
    train_state, carry, (metrics, ep_return, ep_length, ep_won) = program.run(train_state, carry, n, None)

``SearchProgram``'s interface and searched rows (``srljax/learning/anakin_search.py``; the search is handed no env
model), with its own replay: a time ring of ``L`` rows per env (leaves ``[L, B, ...]``) in the carry, so checkpoints
hold it and ``--resume`` continues exactly. Each iteration writes its ``num_steps`` rows per env, then samples
``algo.windows`` windows of ``K + n + 1`` consecutive rows (a uniform env and start among the rows with that many
written after them; none until then: weight 0) and hands ``algos.muzero.unroll_targets`` of them to the update.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from algos.muzero import MuZeroAlgorithm, Window, unroll_targets
from envs.jax_envs import EnvState, JaxEnv
from srljax.learning.anakin_search import SearchProgram


class MuZeroCarry(NamedTuple):
    env: EnvState
    obs: jax.Array  # [B, *O] the row to search next
    replay: Window  # leaves [L, B, ...] (obs [L, B, *O]): a time ring of every env's rows
    ptr: jax.Array  # [] int32: the ring's next row
    count: jax.Array  # [] int32: rows written (<= L)
    key: jax.Array


class MuZeroProgram(SearchProgram):
    """``SearchProgram`` with a trajectory replay and window sampling (the module docstring)."""

    def __init__(self, env: JaxEnv, algo: MuZeroAlgorithm, num_steps: int, max_iterations: int, capacity: int):
        super().__init__(env, algo, num_steps, max_iterations)
        self.symmetries = ()
        self.span = algo.unroll_steps + algo.td_steps + 1
        per_env = math.ceil(capacity / self.num_envs)
        self.length = max(1, math.ceil(per_env / num_steps)) * num_steps  # whole iterations: a write never wraps

    def env_axes(self, carry: MuZeroCarry) -> MuZeroCarry:
        return MuZeroCarry(env=jax.tree.map(lambda _: 0, carry.env), obs=0, replay=jax.tree.map(lambda _: 1, carry.replay),
                           ptr=None, count=None, key=None)

    def start(self, train_state: Any, env_key: jax.Array, act_key: jax.Array) -> MuZeroCarry:
        env_state, ts = self.env.reset(env_key)
        lb = (self.length, self.num_envs)
        zeros = lambda dtype, *shape: jnp.zeros((*lb, *shape), dtype)  # noqa: E731
        replay = Window(obs=zeros(ts.obs.dtype, *ts.obs.shape[1:]), action=zeros(jnp.int32),
                        reward=zeros(jnp.float32), terminated=zeros(bool), searched=zeros(bool),
                        value=zeros(jnp.float32), policy=zeros(jnp.float32, self.env.spec.num_actions))
        return MuZeroCarry(env_state, ts.obs, replay, jnp.int32(0), jnp.int32(0), act_key)

    def sample(self, replay: Window, ptr: jax.Array, count: jax.Array, key: jax.Array) -> Window:
        """``algo.windows`` windows ``[N, W, ...]`` (obs: the first ``K + 1`` rows', all ``W`` with
        ``algo.fresh_values``); ``searched`` all False while fewer than
        ``W`` rows are written."""
        n, w, length = self.algo.windows, self.span, self.length
        k_age, k_env = jax.random.split(key)
        age = w - 1 + jax.random.randint(k_age, (n,), 0, jnp.maximum(count - w + 1, 1))  # rows written after the start
        first = (ptr - 1 - age) % length
        env = jax.random.randint(k_env, (n,), 0, self.num_envs)
        rows = (first[:, None] + jnp.arange(w)) % length
        pick = lambda x: x[rows, env[:, None]]  # noqa: E731 - [L, B, ...] -> [N, W, ...]
        obs_rows = rows if self.algo.fresh_values else rows[:, : self.algo.unroll_steps + 1]
        out = Window(obs=replay.obs[obs_rows, env[:, None]], action=pick(replay.action), reward=pick(replay.reward),
                     terminated=pick(replay.terminated), searched=pick(replay.searched) & (count >= w),
                     value=pick(replay.value), policy=pick(replay.policy))
        return out

    def refresh(self, params: Any, w: Window) -> Window:
        """The current network's values at the rows the n-step targets bootstrap from (``n .. n + K``) in place of
        the stored search values; obs cut back to the first ``K + 1`` rows."""
        n, k1 = self.algo.td_steps, self.algo.unroll_steps + 1
        obs = w.obs[:, n: n + k1]
        _, value = self.algo.predict(params, obs.reshape(-1, *obs.shape[2:]))
        value = lax.stop_gradient(value).reshape(obs.shape[:2]).astype(w.value.dtype)
        return w._replace(obs=w.obs[:, :k1], value=w.value.at[:, n: n + k1].set(value))

    def iteration(self, train_state: Any, carry: MuZeroCarry) -> tuple[Any, MuZeroCarry, Any]:
        params = self.algo.policy_params(train_state)
        sims = self.algo.num_simulations

        def body(c: tuple[EnvState, jax.Array, jax.Array], _: Any) -> Any:
            env_state, obs, key = c
            key, k_search = jax.random.split(key)
            action, policy, value = self.algo.search(params, k_search, obs, None, None, sims)
            searched = ~env_state.done  # a game's last row: its move is ignored (the next step resets)
            env_state, ts = self.env.step(env_state, action)
            row = Window(obs=obs, action=action.astype(jnp.int32), reward=ts.reward, terminated=ts.terminated,
                         searched=searched, value=value, policy=policy)
            return (env_state, ts.obs, key), (row, ts.episode_return, ts.episode_length, self.env.episode_won(env_state))

        (env_state, obs, key), (rows, ep_return, ep_length, ep_won) = lax.scan(
            body, (carry.env, carry.obs, carry.key), None, length=self.num_steps)
        replay = jax.tree.map(lambda ring, x: lax.dynamic_update_slice_in_dim(ring, x.astype(ring.dtype), carry.ptr, 0),
                              carry.replay, rows)
        ptr = (carry.ptr + self.num_steps) % self.length
        count = jnp.minimum(carry.count + self.num_steps, self.length)
        key, k_sample = jax.random.split(key)
        a = self.algo
        window = self.sample(replay, ptr, count, k_sample)
        if a.fresh_values:
            window = self.refresh(params, window)
        batch = unroll_targets(window, a.unroll_steps, a.td_steps, a.gamma)
        train_state, metrics = a.update(train_state, batch)
        metrics |= {"searched_value": jnp.mean(rows.value), "rows_searched": jnp.mean(rows.searched.astype(jnp.float32))}
        return train_state, MuZeroCarry(env_state, obs, replay, ptr, count, key), (metrics, ep_return, ep_length,
                                                                                       ep_won)
