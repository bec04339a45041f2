"""The Anakin program: rollout (``lax.scan`` over the JAX env's step and ``act``) and update, compiled together.

    program = AnakinProgram(env, algo, num_steps=128, max_iterations=64)
    carry = program.start(train_state, env_key, act_key)           # reset every env, act on the first rows
    train_state, carry, (metrics, ep_return, ep_length, ep_won) = program.run(train_state, carry, n, None)
    # n (<= max_iterations) iterations of collect T rows + one update, in one call; outputs stacked [max_iterations, ...],
    # the first n rows valid: metrics {name: [K]}, ep_return / ep_length / ep_won [K, T, B] (NaN / 0 / NaN where no
    # episode ended; ep_won NaN also for envs without an outcome, ``JaxEnv.episode_won``)

Pure functions of their arguments (jit, vmap over seeds, shard over devices as the caller chooses). The
trajectories are exactly what ``SegmentBuilder`` makes from an envpool stream: ``T + 1`` rows whose first row is the
previous segment's bootstrap row with the action and extras acted there, ``first`` flags after a done row, the
running discounted return ``ret_acc`` when the algorithm asks for it (``algos.base.Algorithm.return_gamma``), so
every segment algorithm's ``update`` runs unchanged (``srljax/loops/anakin.py`` drives it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from envs.jax_envs import EnvState, JaxEnv
from srljax.types import RETURN_ACC, Trajectory


class Row(NamedTuple):
    obs: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array


class Carry(NamedTuple):
    """What one iteration hands the next: the envs, the last row with what was acted there, the actor's state."""

    env: EnvState
    row: Row
    action: jax.Array
    extras: dict[str, jax.Array]
    actor_state: Any
    key: jax.Array


class AnakinProgram:
    def __init__(self, env: JaxEnv, algo: Any, num_steps: int, max_iterations: int):
        self.env, self.algo, self.num_steps, self.max_iterations = env, algo, num_steps, max_iterations
        self.num_envs = env.spec.num_envs
        self.stateless = not jax.tree.leaves(algo.initial_actor_state(1))
        self.gamma = getattr(algo, "return_gamma", None)

    def env_axes(self, carry: Carry) -> Carry:
        """Which axis of each carry leaf is the env axis (sharded over devices), None for the acting key."""
        return Carry(*jax.tree.map(lambda _: 0, tuple(carry[:-1])), key=None)

    def _act(self, params: Any, obs: jax.Array, actor_state: Any, first: jax.Array, key: jax.Array) -> Any:
        return self.algo.act(params, obs, actor_state, None if self.stateless else first, key)

    def start(self, train_state: Any, env_key: jax.Array, act_key: jax.Array) -> Carry:
        env_state, ts = self.env.reset(env_key)
        act_key, key = jax.random.split(act_key)
        first = jnp.ones(self.num_envs, bool)
        action, extras, actor_state = self._act(self.algo.policy_params(train_state), ts.obs,
                                                self.algo.initial_actor_state(self.num_envs), first, key)
        if self.gamma is not None:
            extras = {**extras, RETURN_ACC: jnp.zeros(self.num_envs, jnp.float32)}
        return Carry(env_state, Row(ts.obs, ts.reward, ts.terminated, ts.truncated), action, extras, actor_state,
                     act_key)

    def iteration(self, train_state: Any, carry: Carry) -> tuple[Any, Carry, tuple[Any, jax.Array, jax.Array]]:
        """Collect ``num_steps`` rows with the state's params, then one update on the ``[T+1, B]`` segment."""
        params = self.algo.policy_params(train_state)

        def body(c: Carry, _: Any) -> tuple[Carry, Any]:
            env_state, ts = self.env.step(c.env, c.action)
            first = c.row.terminated | c.row.truncated  # this row is the reset row after a done
            key, act_key = jax.random.split(c.key)
            action, extras, actor_state = self._act(params, ts.obs, c.actor_state, first, act_key)
            if self.gamma is not None:
                acc = jnp.where(first, 0.0, c.extras[RETURN_ACC] * self.gamma + ts.reward)
                extras = {**extras, RETURN_ACC: acc}
            row = Row(ts.obs, ts.reward, ts.terminated, ts.truncated)
            return Carry(env_state, row, action, extras, actor_state, key), (row, action, extras, ts.episode_return,
                                                                             ts.episode_length,
                                                                             self.env.episode_won(env_state))

        end, (rows, actions, extras, ep_return, ep_length, ep_won) = lax.scan(body, carry, None, length=self.num_steps)
        cat = lambda head, rest: jnp.concatenate([head[None], rest])  # noqa: E731 - row 0 is the carried row
        traj = Trajectory(obs=cat(carry.row.obs, rows.obs), action=cat(carry.action, actions),
                          reward=cat(carry.row.reward, rows.reward),
                          terminated=cat(carry.row.terminated, rows.terminated),
                          truncated=cat(carry.row.truncated, rows.truncated),
                          extras=jax.tree.map(cat, carry.extras, extras),
                          policy_version=jnp.full(self.num_envs, train_state.step, jnp.int32))
        train_state, metrics = self.algo.update(train_state, traj)
        return train_state, end, (metrics, ep_return, ep_length, ep_won)

    def run(self, train_state: Any, carry: Carry, n: jax.Array, schedule: Any = None) -> tuple[Any, Carry, Any]:
        """``n`` iterations (a traced int, at most ``max_iterations``: one compiled program for every count);
        ``schedule`` is the replay program's (``srljax.learning.anakin_replay``), unused here."""
        return run_iterations(lambda i, state, carry: self.iteration(state, carry), self.max_iterations, train_state,
                              carry, n)


def run_iterations(step: Any, max_iterations: int, train_state: Any, carry: Any, n: jax.Array) -> Any:
    """``n`` (traced, at most ``max_iterations``) calls of ``step(i, state, carry) -> (state, carry, out)`` in one
    ``fori_loop`` (one compiled program for every count); call ``i``'s ``out`` at row ``i`` of outputs with a
    leading ``max_iterations`` axis (rows from ``n`` on stay zero)."""
    shapes = jax.eval_shape(step, jnp.int32(0), train_state, carry)[2]
    outputs = jax.tree.map(lambda s: jnp.zeros((max_iterations, *s.shape), s.dtype), shapes)

    def body(i: jax.Array, c: Any) -> Any:
        state, carry, outputs = c
        state, carry, out = step(i, state, carry)
        outputs = jax.tree.map(lambda buf, x: lax.dynamic_update_index_in_dim(buf, x, i, 0), outputs, out)
        return state, carry, outputs

    return lax.fori_loop(0, n, body, (train_state, carry, outputs))
