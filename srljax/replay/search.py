"""MuZero's replay of searched segments on the host, with reanalyse: what a search buffer worker holds.

    replay = SearchReplay(algo, spec, cfg.algo, columns=1515, seed=0)
    steps = replay.insert(segment, source=actor)         # a Trajectory [T+1, b] with search_value / search_policy
    tree, meta = replay.batch(params, version)           # one update's UnrollBatch (numpy) and what it cost

Each env column of a segment is one stored column of ``T + 1`` rows (a ring of ``columns``, the oldest overwritten),
in the rows of ``algos.muzero.Window``: row j's reward and termination are those of stepping with its move (the
segment's row j + 1), ``searched`` is False on a game's last row. A column whose first row is the last row of a
column held (the same actor, and the same observation, move and search: the env's next segment, which starts where
the last one ended) is linked to it, so windows run on across segment ends as in the Anakin path's ring of rows
(``srljax/learning/anakin_muzero.py``): a window's rows from the last row on are its successor's. A batch is
``algo.windows`` windows of ``K + n + 1`` consecutive rows (a uniform column and start among the rows with that
many held after them); the first ``round(reanalyse_ratio x windows)`` of them are searched again with ``params``
at the rows whose targets are read (``algos.muzero.reanalyse``: rows 0..K's move distributions, rows n..n+K's
values, or one of the two: ``config.reanalyse_targets``), and ``algos.muzero.unroll_targets`` makes every window's
targets. ``meta``: windows, how many were reanalysed, the seconds that took, the targets' mean params version (``version`` for reanalysed windows, the segment's acting
version for the rest).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import jax
import numpy as np

from algos.muzero import SEARCH_POLICY, SEARCH_VALUE, UnrollBatch, Window, reanalyse, unroll_targets
from algos.muzero_config import reanalysed_rows
from srljax.types import EnvSpec, Trajectory


def window_rows(traj: Trajectory) -> dict[str, np.ndarray]:
    """A segment ``[T+1, b]`` -> its columns as ``Window`` rows ``[b, T+1, ...]`` (the last row's reward and
    termination are the next segment's: 0 / False here; ``unroll_targets`` never reads a window's last row's)."""
    done = np.logical_or(traj.terminated, traj.truncated)
    shifted = lambda x: np.concatenate([x[1:], np.zeros_like(x[:1])], axis=0)  # noqa: E731 - row j <- row j + 1
    out = Window(obs=traj.obs, action=np.asarray(traj.action, np.int32), reward=shifted(traj.reward),
                 terminated=shifted(traj.terminated), searched=~done, value=traj.extras[SEARCH_VALUE],
                 policy=traj.extras[SEARCH_POLICY])
    return {k: np.swapaxes(v, 0, 1) for k, v in out._asdict().items()}


def batch_fields(algo: Any, spec: EnvSpec, config: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """The shape and dtype of each leaf of the ``UnrollBatch`` that ``SearchReplay.batch`` makes and the trainer's
    ``SearchSource`` accepts: ``next_obs`` holds the next ``K`` rows' obs where the consistency loss reads them
    (``config.consistency_coef > 0``), else none (``[N, 0, *O]``: a batch's bytes are mostly obs)."""
    n, k, a = algo.windows, config.unroll_steps, spec.num_actions
    obs = str(np.dtype(spec.obs_dtype))
    return UnrollBatch(
        obs=((n, *spec.obs_shape), obs), next_obs=((n, k if config.consistency_coef > 0 else 0, *spec.obs_shape), obs),
        action=((n, k), "int32"), reward=((n, k), "float32"), value=((n, k + 1), "float32"),
        policy=((n, k + 1, a), "float32"), reward_mask=((n, k), "float32"), value_mask=((n, k + 1), "float32"),
        policy_mask=((n, k + 1), "float32"))._asdict()


class SearchReplay:
    def __init__(self, algo: Any, spec: EnvSpec, config: Any, columns: int, seed: int | list[int], key: Any = None):
        self.algo, self.config = algo, config
        self.rows = config.num_steps + 1
        self.span = config.unroll_steps + config.td_steps + 1
        self.columns = columns
        c, r = columns, self.rows
        self.store = Window(obs=np.zeros((c, r, *spec.obs_shape), spec.obs_dtype), action=np.zeros((c, r), np.int32),
                            reward=np.zeros((c, r), np.float32), terminated=np.zeros((c, r), bool),
                            searched=np.zeros((c, r), bool), value=np.zeros((c, r), np.float32),
                            policy=np.zeros((c, r, spec.num_actions), np.float32))._asdict()
        self.versions = np.zeros(c, np.int64)
        self.filled = self.next_column = 0
        # each column's successor (the column starting with its last row; -1: none held) and predecessor, and the
        # columns still waiting for theirs, by the fingerprint of their last row
        self.succ = np.full(c, -1, np.int64)
        self.pred = np.full(c, -1, np.int64)
        self.open: dict[bytes, int] = {}
        self.open_key: dict[int, bytes] = {}
        self.rng = np.random.default_rng(seed)
        self.key = jax.random.PRNGKey(0) if key is None else key
        self.reanalyse_count = int(round(config.reanalyse_ratio * algo.windows))
        K, n, gamma, sims = config.unroll_steps, config.td_steps, config.gamma, config.num_simulations
        # the obs rows the targets keep: the first row's, and the next K rows' where the consistency loss reads them
        self.obs_rows = K + 1 if config.consistency_coef > 0 else 1
        self.targets = jax.jit(lambda w: unroll_targets(w, K, n, gamma))
        self.search = jax.jit(lambda params, key, obs, w: reanalyse(algo, params, key, obs, w, sims))
        # the rows a reanalysed window is searched at (``config.reanalyse_targets``): the policy targets' 0..K, the
        # value bootstraps' n..n+K; which of the search's outputs replace the stored ones
        rows, self.refresh = reanalysed_rows(config)
        self.reanalyse_rows = np.array(rows, np.int64)

    def warm_up(self, params: Any) -> None:
        """Compile the targets and (reanalysing) the search now, for params shaped like ``params`` (a worker's setup:
        a compile inside its loop could outlast ``layout.hang_seconds`` on a loaded machine)."""
        n, w = self.algo.windows, self.span
        zeros = Window(**{k: np.zeros((n, w, *v.shape[2:]), v.dtype) for k, v in self.store.items()})
        jax.block_until_ready(self.targets(zeros._replace(obs=zeros.obs[:, : self.obs_rows])))
        if self.reanalyse_count:
            head = jax.tree.map(lambda x: x[: self.reanalyse_count][:, self.reanalyse_rows], zeros)
            jax.block_until_ready(self.search(params, self.key, head.obs, head))

    def insert(self, traj: Trajectory, source: Any = None) -> int:
        """Store a segment's columns (at most ``columns``: the newest), each linked to the column it continues
        (``source``: who sent it, the actor; a column continues only one from the same source); returns the env
        steps it holds."""
        rows = window_rows(traj)
        b = min(traj.reward.shape[1], self.columns)
        slots = (self.next_column + np.arange(b)) % self.columns
        for slot in slots.tolist():  # overwritten: its links go
            self._unlink(slot)
        for name, store in self.store.items():
            store[slots] = rows[name][-b:]
        self.versions[slots] = np.asarray(traj.policy_version, np.int64)[-b:]
        tag = repr(source).encode()
        for slot in slots.tolist():
            prev = self.open.pop(self._fingerprint(tag, slot, 0), -1)
            if prev >= 0:
                del self.open_key[prev]
                self.succ[prev], self.pred[slot] = slot, prev
            key = self._fingerprint(tag, slot, self.rows - 1)
            if key in self.open:  # two open columns ending in the same row: the older keeps it
                continue
            self.open[key], self.open_key[slot] = slot, key
        self.next_column = int((self.next_column + b) % self.columns)
        self.filled = min(self.columns, self.filled + b)
        return (self.rows - 1) * traj.reward.shape[1]

    def _fingerprint(self, tag: bytes, slot: int, row: int) -> bytes:
        """What identifies a stored row of one source: its observation, move and search."""
        h = hashlib.blake2b(tag, digest_size=16)
        w = Window(**self.store)
        for column in (w.obs, w.action, w.value, w.policy):
            h.update(np.ascontiguousarray(column[slot, row]).tobytes())
        return h.digest()

    def _unlink(self, slot: int) -> None:
        prev, nxt = int(self.pred[slot]), int(self.succ[slot])
        if prev >= 0:
            self.succ[prev] = -1
        if nxt >= 0:
            self.pred[nxt] = -1
        self.pred[slot] = self.succ[slot] = -1
        key = self.open_key.pop(slot, None)
        if key is not None:
            del self.open[key]

    def sample(self) -> tuple[Window, np.ndarray]:
        """``algo.windows`` windows (every row's obs: ``[N, W, *O]``) and their columns' acting versions: a uniform
        column and start among the starts with ``W`` rows held after them (a column's first ``T`` rows where it has a
        successor, its first ``T + 2 - W`` where not)."""
        n, w, t = self.algo.windows, self.span, self.rows - 1
        column = np.empty(n, np.int64)
        start = np.empty(n, np.int64)
        todo = np.arange(n)
        while todo.size:  # rejection: a start too late for a column without a successor is drawn again
            c = self.rng.integers(0, self.filled, todo.size)
            s = self.rng.integers(0, t, todo.size)
            ok = (s + w - 1 <= t) | (self.succ[c] >= 0)
            column[todo[ok]], start[todo[ok]] = c[ok], s[ok]
            todo = todo[~ok]
        rows = start[:, None] + np.arange(w)
        nxt = (rows >= t) & (self.succ[column] >= 0)[:, None]  # from the last row on: the successor's rows
        cols = np.where(nxt, self.succ[column][:, None], column[:, None])
        rows = np.where(nxt, rows - t, rows)
        return Window(**{k: v[cols, rows] for k, v in self.store.items()}), self.versions[column]

    def batch(self, params: Any, version: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """One update's windows with their targets, the first ``reanalyse_count`` searched again with ``params``
        (none when ``params`` is None)."""
        window, versions = self.sample()
        versions = versions.astype(np.float64)
        m = self.reanalyse_count if params is not None else 0
        seconds = 0.0
        if m:
            started = time.monotonic()
            self.key, key = jax.random.split(self.key)
            rows = self.reanalyse_rows
            head = jax.tree.map(lambda x: x[:m][:, rows], window)
            fresh = jax.device_get(self.search(params, key, head.obs, head))
            for name in self.refresh:  # the stored rows of the first m windows <- the new search's
                column = np.array(getattr(window, name))
                column[:m, rows] = getattr(fresh, name)
                window = window._replace(**{name: column})
            versions[:m] = version
            seconds = time.monotonic() - started
        batch = jax.device_get(self.targets(window._replace(obs=window.obs[:, : self.obs_rows])))
        meta = {"windows": int(self.algo.windows), "reanalysed": m, "reanalyse_s": round(seconds, 6),
                "target_version": float(versions.mean())}
        return {k: np.asarray(v) for k, v in batch._asdict().items()}, meta
