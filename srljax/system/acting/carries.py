"""Recurrent state on both ends of remote inference: one carry per ``(actor, env)`` row, held by the policy worker.

    # actor (PolicyClient): what a recurrent request adds to the observations
    rows = RowTags(num_envs, actor=index)
    tree = {"obs": ts.obs, **rows.tag(ts)}     # first [n] bool, env_id [n] int32, seq [n] int64, actor [1] int32

    # policy worker
    store = CarryStore(algo.initial_actor_state, num_envs, num_actors)
    actor, ids, seq, first = checked_tags(tree, n, num_envs, num_actors)   # ValueError if malformed
    state = store.gather(actor, ids, seq)      # numpy carry rows [n, ...] to act with (``first`` resets inside act)
    store.scatter(actor, ids, seq, new_state)  # after act

``first`` is computed where the env rows are seen (the actor): a row starts an episode when the env's
previous row was done, or it is the env's first row since the actor started, so a restarted actor
starts every carry afresh. Every row request carries a per-env sequence number: a resent request
(its reply lost, ``PolicyClient``) has the number already served, and is acted on again from the
carry *before* that step instead of stepping the carry twice.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from srljax.layout import ACTOR
from srljax.system.shell.common import check_array
from srljax.types import TimeStep

TAG_KEYS = ("first", "env_id", "seq", ACTOR)


class RowTags:
    """The actor's side: per env, whether its next row starts an episode and how many rows it has sent."""

    def __init__(self, num_envs: int, actor: int):
        self.actor = np.full(1, actor, np.int32)
        self.next_first = np.ones(num_envs, bool)
        self.seq = np.zeros(num_envs, np.int64)

    def tag(self, ts: TimeStep) -> dict[str, np.ndarray]:
        """Tags for one recv'd batch (call once per batch, not per resend)."""
        ids = np.asarray(ts.env_id, np.int32)
        first = self.next_first[ids]
        self.next_first[ids] = ts.terminated | ts.truncated
        self.seq[ids] += 1
        return {"first": first, "env_id": ids, "seq": self.seq[ids], ACTOR: self.actor}


def checked_tags(tree: dict[str, Any], n: int, num_envs: int, num_actors: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``(actor, env_id, seq, first)`` of a recurrent request of ``n`` rows, else ValueError."""
    actor = check_array(ACTOR, tree.get(ACTOR), (1,), "int32")
    ids = check_array("env_id", tree.get("env_id"), (n,), "int32")
    seq = check_array("seq", tree.get("seq"), (n,), "int64")
    first = check_array("first", tree.get("first"), (n,), "bool")
    if not 0 <= int(actor[0]) < num_actors:
        raise ValueError(f"actor {int(actor[0])} is not in [0, {num_actors})")
    if n and (ids.min() < 0 or ids.max() >= num_envs or len(np.unique(ids)) != n):
        raise ValueError(f"env ids must be distinct and in [0, {num_envs})")
    return int(actor[0]), ids, seq, first


class CarryStore:
    """The policy worker's side: for every (actor, env) row, the carry now and the one before the last step."""

    def __init__(self, initial_state: Callable[[int], Any], num_envs: int, num_actors: int):
        zeros = jax.tree.map(np.asarray, initial_state(num_envs))
        self.now = [jax.tree.map(np.copy, zeros) for _ in range(num_actors)]
        self.before = [jax.tree.map(np.copy, zeros) for _ in range(num_actors)]
        self.served = [np.full(num_envs, -1, np.int64) for _ in range(num_actors)]
        self.resent_rows = 0

    def gather(self, actor: int, ids: np.ndarray, seq: np.ndarray) -> Any:
        """The carry rows ``ids`` of ``actor`` act with: the current one, or for a resent row the one before."""
        again = seq == self.served[actor][ids]
        self.resent_rows += int(again.sum())
        pick = lambda now, before: np.where(again.reshape(-1, *[1] * (now.ndim - 1)), before[ids], now[ids])  # noqa: E731
        return jax.tree.map(pick, self.now[actor], self.before[actor])

    def scatter(self, actor: int, ids: np.ndarray, seq: np.ndarray, state: Any) -> None:
        """Store the carries ``act`` returned for rows ``ids`` (numpy ``[n, ...]``)."""
        fresh = ids[seq != self.served[actor][ids]]  # a resent row keeps its "before"

        def put(now: np.ndarray, before: np.ndarray, new: np.ndarray) -> None:
            before[fresh] = now[fresh]
            now[ids] = new

        jax.tree.map(put, self.now[actor], self.before[actor], state)
        self.served[actor][ids] = seq
