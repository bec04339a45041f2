"""The Anakin program of value decomposition (VDN, QMIX; ``algos/qmix.py``): recurrent epsilon-greedy acting, a replay
of sequences on the device and the gradient steps, compiled together.

    program = SequenceProgram(env, algo, num_steps=32, max_iterations=64, capacity=100_000)
    carry = program.start(train_state, env_key, act_key)
    train_state, carry, (metrics, ep_return, ep_length, ep_won) = program.run(train_state, carry, n, None)

One iteration acts ``num_steps`` rows of every env with the agents' GRU states carried from the last iteration (zeroed
on an episode's first row) and epsilon from the carry's env-step count (``algo.epsilon``), and writes one sequence
per env into a ring of ``C`` iterations (leaves ``[C, T+1, B, ...]``): its ``T+1`` rows (row 0 the previous
iteration's last row, so every transition lies inside a sequence), the ``T`` actions and the GRU state row 0 was acted
with (``algos.qmix.Sequences``). Once ``algo.learning_starts`` env steps are acted, ``algo.gradient_steps`` updates
follow, each on ``algo.batch_size`` sequences drawn uniformly (a written iteration, an env), which the loss
re-unrolls from their stored GRU states. The ring, its pointer, the count of env steps and the GRU states are in the
carry, so a checkpoint holds them and ``--resume`` continues exactly (``srljax/loops/anakin.py``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from algos.qmix import QMixAlgorithm, Sequences
from envs.jax_envs import EnvState, JaxEnv
from srljax.learning.anakin import Row, run_iterations


class SequenceCarry(NamedTuple):
    env: EnvState
    row: Row  # the last row, to act on next
    h: jax.Array  # [B, N, H] the GRU state it is acted with (reset applied)
    replay: Sequences  # leaves [C, T+1, B, ...] (action [C, T, B, N], h0 [C, B, N, H])
    ptr: jax.Array  # [] int32: the ring's next slot
    count: jax.Array  # [] int32: slots written (<= C)
    steps: jax.Array  # [] int32: env steps acted (all envs)
    key: jax.Array


class SequenceProgram:
    """Acting, the replay of sequences and the updates of ``QMixAlgorithm`` (the module docstring)."""

    def __init__(self, env: JaxEnv, algo: QMixAlgorithm, num_steps: int, max_iterations: int, capacity: int):
        self.env, self.algo, self.num_steps, self.max_iterations = env, algo, num_steps, max_iterations
        self.num_envs = env.spec.num_envs
        self.slots = max(1, math.ceil(capacity / (self.num_envs * num_steps)))

    def env_axes(self, carry: SequenceCarry) -> SequenceCarry:
        """Which axis of each carry leaf is the env axis (sharded over devices), None where there is none."""
        replay = Sequences(obs=2, action=2, reward=2, terminated=2, truncated=2, h0=1)
        return SequenceCarry(env=jax.tree.map(lambda _: 0, carry.env), row=jax.tree.map(lambda _: 0, carry.row), h=0,
                             replay=replay, ptr=None, count=None, steps=None, key=None)

    def start(self, train_state: Any, env_key: jax.Array, act_key: jax.Array) -> SequenceCarry:
        env_state, ts = self.env.reset(env_key)
        spec, b, c, t = self.env.spec, self.num_envs, self.slots, self.num_steps
        n, hidden = spec.num_agents, self.algo.hidden_size
        replay = Sequences(obs=jnp.zeros((c, t + 1, b, *ts.obs.shape[1:]), ts.obs.dtype),
                           action=jnp.zeros((c, t, b, n), jnp.int32), reward=jnp.zeros((c, t + 1, b), jnp.float32),
                           terminated=jnp.zeros((c, t + 1, b), bool), truncated=jnp.zeros((c, t + 1, b), bool),
                           h0=jnp.zeros((c, b, n, hidden), jnp.float32))
        return SequenceCarry(env_state, Row(ts.obs, ts.reward, ts.terminated, ts.truncated),
                             jnp.zeros((b, n, hidden), jnp.float32), replay, jnp.int32(0), jnp.int32(0), jnp.int32(0),
                             act_key)

    def sample(self, replay: Sequences, count: jax.Array, key: jax.Array) -> Sequences:
        """``algo.batch_size`` sequences ``[T+1, M, ...]`` (``h0`` ``[M, N, H]``): a uniform written slot and env each."""
        m = self.algo.batch_size
        k_slot, k_env = jax.random.split(key)
        slot = jax.random.randint(k_slot, (m,), 0, jnp.maximum(count, 1))
        env = jax.random.randint(k_env, (m,), 0, self.num_envs)
        timed = lambda x: jnp.swapaxes(x[slot, :, env], 0, 1)  # noqa: E731 - [C, T', B, ...] -> [T', M, ...]
        return Sequences(obs=timed(replay.obs), action=timed(replay.action), reward=timed(replay.reward),
                         terminated=timed(replay.terminated), truncated=timed(replay.truncated), h0=replay.h0[slot, env])

    def iteration(self, train_state: Any, carry: SequenceCarry) -> tuple[Any, SequenceCarry, Any]:
        algo = self.algo
        params = algo.policy_params(train_state)
        epsilon = algo.epsilon(carry.steps)
        actor = {"epsilon": jnp.full((self.num_envs,), epsilon, jnp.float32)}

        def body(c: tuple[EnvState, Row, jax.Array, jax.Array], _: Any) -> Any:
            env_state, row, h, key = c
            key, k_act = jax.random.split(key)
            action, _, acted = algo.act(params, row.obs, {**actor, "h": h}, None, k_act)
            env_state, ts = self.env.step(env_state, action)
            done = row.terminated | row.truncated  # the next row is a reset row: its GRU state starts at zero
            h = jnp.where(done[:, None, None], 0.0, acted["h"])
            nxt = Row(ts.obs, ts.reward, ts.terminated, ts.truncated)
            return (env_state, nxt, h, key), (action, nxt, ts.episode_return, ts.episode_length,
                                              self.env.episode_won(env_state))

        (env_state, row, h, key), (actions, rows, ep_return, ep_length, ep_won) = lax.scan(
            body, (carry.env, carry.row, carry.h, carry.key), None, length=self.num_steps)
        cat = lambda head, rest: jnp.concatenate([head[None], rest])  # noqa: E731 - row 0 is the carried row
        seq = Sequences(obs=cat(carry.row.obs, rows.obs), action=actions, reward=cat(carry.row.reward, rows.reward),
                        terminated=cat(carry.row.terminated, rows.terminated),
                        truncated=cat(carry.row.truncated, rows.truncated), h0=carry.h)
        replay = jax.tree.map(lambda ring, x: lax.dynamic_update_index_in_dim(ring, x.astype(ring.dtype), carry.ptr, 0),
                              carry.replay, seq)
        ptr, count = (carry.ptr + 1) % self.slots, jnp.minimum(carry.count + 1, self.slots)
        steps = carry.steps + self.num_steps * self.num_envs
        key, k_sample = jax.random.split(key)

        def learn(state: Any) -> tuple[Any, Any]:
            def one(state: Any, i: jax.Array) -> tuple[Any, Any]:
                return algo.update(state, self.sample(replay, count, jax.random.fold_in(k_sample, i)))

            state, metrics = lax.scan(one, state, jnp.arange(algo.gradient_steps))
            return state, jax.tree.map(jnp.mean, metrics)

        shapes = jax.eval_shape(learn, train_state)[1]
        idle = lambda state: (state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))  # noqa: E731
        learning = steps >= algo.learning_starts
        train_state, metrics = lax.cond(learning, learn, idle, train_state)
        metrics = {**metrics, "epsilon": epsilon, "gradient_steps": jnp.where(learning, algo.gradient_steps, 0)}
        carry = SequenceCarry(env_state, row, h, replay, ptr, count, steps, key)
        return train_state, carry, (metrics, ep_return, ep_length, ep_won)

    def run(self, train_state: Any, carry: SequenceCarry, n: jax.Array, schedule: Any = None) -> Any:
        """``n`` iterations (a traced count, at most ``max_iterations``); ``schedule`` unused (``AnakinProgram.run``)."""
        return run_iterations(lambda i, state, carry: self.iteration(state, carry), self.max_iterations, train_state,
                              carry, n)
