"""The Anakin program of a search algorithm (AlphaZero, ``algos/alphazero.py``): every env's move chosen by a tree
search whose model is the env's own step, then one update on the searched rows, compiled together.

    program = SearchProgram(env, algo, num_steps=32, max_iterations=64)
    carry = program.start(train_state, env_key, act_key)
    train_state, carry, (metrics, ep_return, ep_length, ep_won) = program.run(train_state, carry, n, None)

The same interface as ``srljax.learning.anakin.AnakinProgram`` (``srljax/loops/anakin.py`` drives both). Each
iteration searches ``num_steps`` rows of every env (``lax.scan``), steps the envs with the chosen moves (a game's
first ``algo.opening_moves`` at random) (envpool's
lazy autoreset, ``envs/jax_envs``: a game's last row is not searched for training, weight 0), and computes each
row's value target backwards: the mover's reward plus the next row's target, negated for a two-player game
(``EnvSpec.players``), the outcome where the game ended inside the rows, the search's value where a game was cut
by a time limit, and the network's value of the row after the last where the rows stop. The update trains on these
rows (with their mirror images, ``algo.augment`` and ``Family.symmetries``) and those of the ``replay_iterations - 1`` iterations before (a ring in the carry, so checkpoints hold it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from algos.alphazero import SearchAlgorithm, SearchBatch
from envs.jax_envs import EnvState, JaxEnv
from srljax.learning.anakin import AnakinProgram


def env_model(env: JaxEnv) -> Any:
    """The search's model: ``model(key, inner [B], action [B]) -> (obs, inner, reward, terminated)``, the env's own
    step without autoreset (a search never steps past a game's end: mctx stops at a zero discount)."""
    fam = env.family

    def model(key: jax.Array, inner: Any, action: jax.Array) -> Any:
        obs, inner, reward, terminated, _ = jax.vmap(fam.step)(jax.random.split(key, action.shape[0]), inner, action)
        return env._obs(obs), inner, reward, terminated  # noqa: SLF001 - the spec's dtype, as env.step gives

    return model


class SearchCarry(NamedTuple):
    env: EnvState
    obs: jax.Array  # [B, D] the row to search next
    replay: SearchBatch  # leaves [R, T * B, ...]: the rows of the last R iterations
    slot: jax.Array  # [] int32: the ring's next slot
    filled: jax.Array  # [] int32: slots holding rows
    key: jax.Array


def value_targets(reward: jax.Array, terminated: jax.Array, truncated: jax.Array, searched: jax.Array,
                  bootstrap: jax.Array, sign: float) -> jax.Array:
    """Rows ``t < T`` of ``[T, B]`` arrays: ``reward[t]`` / ``terminated[t]`` / ``truncated[t]`` are what moving from
    row t gave (the row after it), ``searched[t]`` the search's value of row t + 1 (used where a time limit cut the
    game there), ``bootstrap [B]`` the value of row T. ``z[t] = reward[t] + sign * next`` where next is 0 after a
    termination, the searched value after a truncation, else ``z[t + 1]`` (``bootstrap`` after the last row)."""

    def back(nxt: jax.Array, x: Any) -> tuple[jax.Array, jax.Array]:
        r, term, trunc, v = x
        z = r + sign * jnp.where(term, 0.0, jnp.where(trunc, v, nxt))
        return z, z

    _, z = lax.scan(back, bootstrap, (reward, terminated, truncated, searched), reverse=True)
    return z


class SearchProgram(AnakinProgram):
    """``AnakinProgram``'s ``run`` over this iteration."""

    def __init__(self, env: JaxEnv, algo: SearchAlgorithm, num_steps: int, max_iterations: int):
        super().__init__(env, algo, num_steps, max_iterations)
        self.sign = -1.0 if env.spec.players == 2 else 1.0
        self.model = env_model(env)
        self.symmetries = env.family.symmetries if algo.augment else ()
        self.opening_moves = algo.opening_moves
        self.legal = env.spec.legal_actions

    def _random_legal(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        """A uniformly random legal move per row (any move where the env has no legal-move flags)."""
        n = self.env.spec.num_actions
        flags = obs[:, self.legal[0]: self.legal[1]] > 0.5 if self.legal else jnp.ones((obs.shape[0], n), bool)
        logits = jnp.where(flags | ~flags.any(-1, keepdims=True), 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    def env_axes(self, carry: SearchCarry) -> SearchCarry:
        """The env axis of each carry leaf (sharded over devices); the ring's rows are not split by env."""
        return SearchCarry(env=jax.tree.map(lambda _: 0, carry.env), obs=0,
                           replay=jax.tree.map(lambda _: None, carry.replay), slot=None, filled=None, key=None)

    def start(self, train_state: Any, env_key: jax.Array, act_key: jax.Array) -> SearchCarry:
        env_state, ts = self.env.reset(env_key)
        rows = self.num_steps * self.num_envs * (1 + len(self.symmetries))
        r = self.algo.replay_iterations
        a = self.env.spec.num_actions
        replay = SearchBatch(obs=jnp.zeros((r, rows, *ts.obs.shape[1:]), ts.obs.dtype),
                             policy=jnp.zeros((r, rows, a), jnp.float32), value=jnp.zeros((r, rows), jnp.float32),
                             weight=jnp.zeros((r, rows), jnp.float32))
        return SearchCarry(env_state, ts.obs, replay, jnp.int32(0), jnp.int32(0), act_key)

    def iteration(self, train_state: Any, carry: SearchCarry) -> tuple[Any, SearchCarry, Any]:
        params = self.algo.policy_params(train_state)
        sims = self.algo.num_simulations

        def body(c: tuple[EnvState, jax.Array, jax.Array], _: Any) -> Any:
            env_state, obs, key = c
            key, k_search, k_open = jax.random.split(key, 3)
            action, policy, value = self.algo.search(params, k_search, obs, env_state.inner, self.model, sims)
            if self.opening_moves:  # a game's first moves at random among the legal ones (algo.opening_moves)
                opening = env_state.episode_length < self.opening_moves
                action = jnp.where(opening, self._random_legal(k_open, obs), action)
            searched = ~env_state.done  # a game's last row: its move is ignored (the next step resets)
            env_state, ts = self.env.step(env_state, action)
            out = (obs, policy, value, searched, ts.reward, ts.terminated, ts.truncated, ts.episode_return,
                   ts.episode_length, self.env.episode_won(env_state))
            return (env_state, ts.obs, key), out

        (env_state, obs, key), rows = lax.scan(body, (carry.env, carry.obs, carry.key), None, length=self.num_steps)
        row_obs, policy, value, searched, reward, terminated, truncated, ep_return, ep_length, ep_won = rows
        _, bootstrap = self.algo.predict(params, obs)
        next_value = jnp.concatenate([value[1:], bootstrap[None]])
        z = value_targets(reward, terminated, truncated, next_value, bootstrap, self.sign)
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731 - [T, B, ...] -> [T * B, ...]
        fresh = SearchBatch(obs=flat(row_obs), policy=flat(policy), value=flat(z),
                            weight=flat(searched.astype(jnp.float32)))
        images = [fresh._replace(obs=fresh.obs[:, jnp.asarray(o)], policy=fresh.policy[:, jnp.asarray(a)])
                  for o, a in self.symmetries]
        fresh = jax.tree.map(lambda *xs: jnp.concatenate(xs), fresh, *images)
        replay = jax.tree.map(lambda ring, x: lax.dynamic_update_index_in_dim(ring, x, carry.slot, 0), carry.replay, fresh)
        filled = jnp.minimum(carry.filled + 1, self.algo.replay_iterations)
        # slots not yet filled weigh 0 (their rows are zeros)
        live = (jnp.arange(self.algo.replay_iterations) < filled).astype(jnp.float32)[:, None]
        batch = jax.tree.map(flat, replay._replace(weight=replay.weight * live))
        train_state, metrics = self.algo.update(train_state, batch)
        metrics |= {"searched_value": jnp.mean(value), "rows_searched": jnp.mean(searched.astype(jnp.float32))}
        slot = (carry.slot + 1) % self.algo.replay_iterations
        return train_state, SearchCarry(env_state, obs, replay, slot, filled, key), (metrics, ep_return, ep_length, ep_won)
