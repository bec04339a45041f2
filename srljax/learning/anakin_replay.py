"""The Anakin program of a replay algorithm (DQN, a user's): acting, an on-device replay and updates compiled together.

    program = AnakinReplayProgram(env, algo, rows=20, updates=16, batch_size=128, n_step=1, capacity=10_000, ...)
    carry = program.start(train_state, env_key, act_key)
    train_state, carry, (metrics, ep_return, ep_length, ep_won) = program.run(train_state, carry, n, schedule)

One iteration acts ``rows`` steps of every env (the exploration values of ``schedule["explore"]`` in the actor
state, as ``srljax.loops.replay`` puts them there), appends the rows to the replay, then runs the first
``schedule["updates"][k]`` of ``updates`` updates on uniformly sampled n-step ``ReplayBatch`` es; the host computes
the schedule with the replay loop's own accounting (exploration over env steps, updates owed by the replay ratio).

The replay (``DeviceReplay``) is one ring per env of ``capacity // num_envs`` rows, stored as ``TimeStep`` rows with
the action taken there, so windows follow envpool's lazy autoreset exactly as ``srljax.replay.buffer.Replay``'s do:
a window's entries after its first done belong to the next episode (``algos.returns.n_step_return`` ignores them),
``next_obs`` is the row after the first done transition (for a truncation, the final observation); a sampled start
row that is itself done (its next row is a reset) gets weight 0. Chosen over flashbax: this one is the replay's
semantics in 60 lines and lives in the carry, so a checkpoint holds it and ``--resume`` continues exactly.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from envs.jax_envs import EnvState, JaxEnv
from srljax.learning.anakin import Row, run_iterations
from srljax.types import ReplayBatch


class DeviceReplay(NamedTuple):
    obs: jax.Array  # [L, B, *O]
    action: jax.Array  # [L, B, *A]
    reward: jax.Array  # [L, B]
    terminated: jax.Array  # [L, B]
    truncated: jax.Array  # [L, B]
    written: jax.Array  # [] int32: rows written per env so far


def empty_replay(spec: Any, length: int) -> DeviceReplay:
    b = spec.num_envs
    return DeviceReplay(obs=jnp.zeros((length, b, *spec.obs_shape), spec.obs_dtype),
                        action=jnp.zeros((length, b, *spec.action_shape), spec.action_dtype),
                        reward=jnp.zeros((length, b), jnp.float32), terminated=jnp.zeros((length, b), bool),
                        truncated=jnp.zeros((length, b), bool), written=jnp.zeros((), jnp.int32))


def add_rows(replay: DeviceReplay, obs: Any, action: Any, row: Row) -> DeviceReplay:
    """Append ``[S, B]`` rows (obs, the action taken there, the reward and flags that led to them)."""
    length = replay.obs.shape[0]
    at = (replay.written + jnp.arange(obs.shape[0])) % length
    return DeviceReplay(obs=replay.obs.at[at].set(obs), action=replay.action.at[at].set(action),
                        reward=replay.reward.at[at].set(row.reward), terminated=replay.terminated.at[at].set(row.terminated),
                        truncated=replay.truncated.at[at].set(row.truncated), written=replay.written + obs.shape[0])


def sample(replay: DeviceReplay, key: jax.Array, batch_size: int, n_step: int) -> ReplayBatch:
    """``batch_size`` n-step transitions, uniform over the start rows whose window is stored."""
    length, num_envs = replay.reward.shape
    lo = jnp.maximum(0, replay.written - length)
    hi = jnp.maximum(lo + 1, replay.written - n_step)  # exclusive: the start's n rows after it are written
    k_t, k_b = jax.random.split(key)
    t = jax.random.randint(k_t, (batch_size,), lo, hi)
    b = jax.random.randint(k_b, (batch_size,), 0, num_envs)
    window = (t[:, None] + 1 + jnp.arange(n_step)) % length  # [N, n]
    reward, terminated, truncated = (x[window, b[:, None]] for x in (replay.reward, replay.terminated, replay.truncated))
    done = terminated | truncated
    first_done = jnp.where(done.any(axis=1), jnp.argmax(done, axis=1), n_step - 1)
    start = t % length
    start_done = replay.terminated[start, b] | replay.truncated[start, b]
    return ReplayBatch(obs=replay.obs[start, b], action=replay.action[start, b], reward=reward, terminated=terminated,
                       truncated=truncated, next_obs=replay.obs[(t + 1 + first_done) % length, b],
                       weight=jnp.where(start_done, 0.0, 1.0).astype(jnp.float32))


class ReplayCarry(NamedTuple):
    env: EnvState
    row: Row
    replay: DeviceReplay
    key: jax.Array


class AnakinReplayProgram:
    def __init__(self, env: JaxEnv, algo: Any, *, rows: int, updates: int, batch_size: int, n_step: int,
                 capacity: int, max_iterations: int):
        self.env, self.algo = env, algo
        self.rows, self.updates, self.batch_size, self.n_step = rows, updates, batch_size, n_step
        self.length = max(capacity // env.spec.num_envs, rows + n_step + 1)
        self.max_iterations = max_iterations
        self.num_envs = env.spec.num_envs

    def env_axes(self, carry: ReplayCarry) -> ReplayCarry:
        """Which axis of each carry leaf is the env axis (sharded over devices), None where there is none."""
        rows = jax.tree.map(lambda _: 1, carry.replay._replace(written=0))._replace(written=None)
        return ReplayCarry(jax.tree.map(lambda _: 0, carry.env), jax.tree.map(lambda _: 0, carry.row), rows, None)

    def start(self, train_state: Any, env_key: jax.Array, act_key: jax.Array) -> ReplayCarry:
        env_state, ts = self.env.reset(env_key)
        return ReplayCarry(env_state, Row(ts.obs, ts.reward, ts.terminated, ts.truncated),
                           empty_replay(self.env.spec, self.length), act_key)

    def iteration(self, train_state: Any, carry: ReplayCarry, explore: dict[str, jax.Array],
                  owed: jax.Array) -> tuple[Any, ReplayCarry, Any]:
        params = self.algo.policy_params(train_state)
        actor_state = {k: jnp.full((self.num_envs,), v, jnp.float32) for k, v in explore.items()}

        def act_step(c: ReplayCarry, _: Any) -> tuple[ReplayCarry, Any]:
            key, act_key = jax.random.split(c.key)
            action, _, _ = self.algo.act(params, c.row.obs, actor_state, None, act_key)
            env_state, ts = self.env.step(c.env, action)
            stored = (c.row.obs, action, c.row)
            row = Row(ts.obs, ts.reward, ts.terminated, ts.truncated)
            return ReplayCarry(env_state, row, c.replay, key), (stored, ts.episode_return, ts.episode_length,
                                                                self.env.episode_won(env_state))

        carry, ((obs, action, row), ep_return, ep_length, ep_won) = lax.scan(act_step, carry, None, length=self.rows)
        replay = add_rows(carry.replay, obs, action, row)
        key, sample_key = jax.random.split(carry.key)

        def update(state: Any, i: jax.Array) -> tuple[Any, Any]:
            batch = sample(replay, jax.random.fold_in(sample_key, i), self.batch_size, self.n_step)
            new_state, metrics, _ = self.algo.update(state, batch)
            skip = i >= owed
            state = jax.tree.map(lambda old, new: jnp.where(skip, old, new), state, new_state)
            return state, metrics

        train_state, metrics = lax.scan(update, train_state, jnp.arange(self.updates))
        return train_state, ReplayCarry(carry.env, carry.row, replay, key), (metrics, ep_return, ep_length, ep_won)

    def run(self, train_state: Any, carry: ReplayCarry, n: jax.Array, schedule: dict[str, Any]) -> Any:
        """``n`` iterations; ``schedule``: ``explore`` {name: [max_iterations]} and ``updates`` [max_iterations]."""
        def step(i: jax.Array, state: Any, carry: ReplayCarry) -> Any:
            now = jax.tree.map(lambda x: x[i], schedule)
            return self.iteration(state, carry, now["explore"], now["updates"])

        return run_iterations(step, self.max_iterations, train_state, carry, n)
