"""One acting module for every shell that steps envs: the single-process loop, actors, evaluation.

    acting = Acting(algo, num_envs=spec.num_envs, key=jax.random.PRNGKey(0))
    ts = env.recv()
    action, extras = acting.act(params, ts)   # numpy, rows in ts.env_id order; per-env actor state kept
    env.send(action, ts.env_id)

    act = jit_act(algo, packing)               # a policy worker: packed rows for many actors at once

``Acting`` keeps one actor state per env row (recurrent policies carry it across batches of an
async env ring), whether each env's next row starts an episode (``first``: its previous row was
done, or the env has not reported since this ``Acting`` was made, so a restarted actor starts
fresh carries), and the act key; the jitted call splits the key inside the compiled program (an
eager ``jax.random.split`` per batch costs about as much as the small policy networks themselves)
and the action and extras come back in one ``device_get``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from srljax.types import EnvSpec, TimeStep


def jit_act(algo: Any, packing: Any = None) -> Any:
    """``act(params, obs, actor_state, first, key) -> (action, extras, actor_state, next_key)``, jitted.

    With a ``ReplyPacking`` it returns ``(rows, actor_state, next_key)`` instead, ``rows`` the
    action and extras packed into one uint8 array (what a policy worker sends back).
    """

    def act(params: Any, obs: Any, actor_state: Any, first: Any, key: Any) -> Any:
        key, act_key = jax.random.split(key)
        action, extras, actor_state = algo.act(params, obs, actor_state, first, act_key)
        if packing is not None:
            return packing.pack(action, extras), actor_state, key
        return action, extras, actor_state, key

    return jax.jit(act)


def warm_up(act: Any, algo: Any, params: Any, spec: EnvSpec, batch_sizes: list[int]) -> None:
    """Compile ``act`` (from ``jit_act``) for every batch size now, in setup, not on the first requests.

    ``params``: any params of the right structure (e.g. ``ParamsCodec.zeros()``).
    """
    params = jax.device_put(params)
    for n in batch_sizes:
        obs = np.zeros((n, *spec.obs_shape), spec.obs_dtype)
        state = algo.initial_actor_state(n)
        first = np.ones(n, bool) if jax.tree.leaves(state) else None
        jax.block_until_ready(act(params, obs, state, first, jax.random.PRNGKey(0)))


class Acting:
    """Acts on env batches with given params; owns the act key and the per-env actor state."""

    def __init__(self, algo: Any, num_envs: int, key: jax.Array, packing: Any = None):
        self.algo = algo
        self.key = key
        # host (numpy) copies: a recurrent carry's rows are gathered and stored with numpy and fetched in
        # the same ``device_get`` as the action (eager jax gathers/scatters cost ~1 ms per call on CPU)
        self.actor_state = jax.tree.map(np.array, algo.initial_actor_state(num_envs))
        self.first = np.ones(num_envs, bool)  # every env's next row is its first
        # a stateless policy has nothing to reset: None keeps its jitted call one argument lighter
        self.stateless = not jax.tree.leaves(self.actor_state)
        # ``packing`` (a ``ReplyPacking``): a stateless policy's action and extras come back as one uint8 array,
        # one device-to-host copy instead of one per array (an actor acting 16 rows per call spends ~30% less CPU)
        self.packing = packing if self.stateless else None
        self.jitted = jit_act(algo, self.packing)

    def state(self) -> dict[str, np.ndarray]:
        """The act key, per-env actor states and ``first`` flags as numpy arrays (a run's checkpoint)."""
        out = {"key": np.asarray(jax.device_get(self.key)), "first": self.first.copy()}
        out |= {f"actor_state/{i}": np.array(x) for i, x in enumerate(jax.tree.leaves(self.actor_state))}
        return out

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        self.key = jax.numpy.asarray(state["key"])
        self.first[...] = state["first"]
        for i, store in enumerate(jax.tree.leaves(self.actor_state)):
            store[...] = state[f"actor_state/{i}"]

    def warm_up(self, params: Any, spec: EnvSpec) -> None:
        warm_up(self.jitted, self.algo, params, spec, [spec.batch_size])

    def act(self, params: Any, ts: TimeStep) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Action and extras for the rows of ``ts`` (numpy), with the actor state of those envs."""
        if self.packing is not None:
            rows, _, self.key = self.jitted(params, ts.obs, self.actor_state, None, self.key)
            return self.packing.unpack(np.asarray(rows))
        if self.stateless:
            action, extras, _, self.key = self.jitted(params, ts.obs, self.actor_state, None, self.key)
            return jax.device_get((action, extras))
        ids = ts.env_id
        first = self.first[ids]
        self.first[ids] = ts.terminated | ts.truncated  # envpool's next row for a done env is its reset row
        rows_state = jax.tree.map(lambda x: x[ids], self.actor_state)
        action, extras, rows_state, self.key = self.jitted(params, ts.obs, rows_state, first, self.key)
        action, extras, rows_state = jax.device_get((action, extras, rows_state))
        for store, rows in zip(jax.tree.leaves(self.actor_state), jax.tree.leaves(rows_state)):
            store[ids] = rows
        return action, extras
