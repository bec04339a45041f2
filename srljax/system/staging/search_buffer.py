"""SearchBufferWorker: MuZero's replay in the worker graph, with reanalyse; actors' segments in, window batches out.

    worker = SearchBufferWorker(cfg, index=0, names=names)   # run by a backend for algo=muzero, distributed

The BUFFER role's worker for a search algorithm with a learned model (``srljax.layout.SEARCH_WORKERS``).

* **In** (samples, PULL): actors' segments ``[T+1, b]`` (every move searched: the extras ``search_value`` and
  ``search_policy``, ``algos.muzero.act``). Each env column is kept as one stored column of ``T + 1`` rows in a ring
  of ``algo.replay_capacity / layout.num_buffer_workers`` rows (the oldest column overwritten), in the rows of
  ``algos.muzero.Window``: row j's reward and termination are those of stepping with its move (the segment's row
  j + 1), ``searched`` is False on a game's last row.
* **Reanalyse**: the buffer follows the trainer's params like a policy worker (``ParamsFollower``). Of each batch of
  ``algo.windows`` windows (``K + n + 1`` consecutive rows, a uniform column and start, inside one column),
  ``round(algo.reanalyse_ratio x windows)`` are searched again row by row with the newest params it holds
  (``algos.muzero.reanalyse``), which replaces their search values and move distributions: the policy and value
  targets (``algos.muzero.unroll_targets``, computed here) are then the newest params' search, not the actor's.
* **Out** (samples, PUSH to the trainer): ``UnrollBatch`` trees (one update's windows), at most one batch per
  ``trainer.batch_envs x algo.num_steps / layout.num_buffer_workers`` env steps inserted here (plus one ahead), so
  updates keep pace with env steps; each batch's meta carries the env steps inserted since the last message, the
  finished episodes, how many windows were reanalysed and in how many seconds, and the targets' params versions
  (``target_version``: the reanalysing params' for reanalysed windows, the acting params' for the rest). A report
  (an empty tree) goes every ``REPORT_S`` when no batch does.

A restarted buffer starts empty (its replay is lost; the actors' next segments fill it). Windows never cross a
segment's end (each stored column is one segment), so a column's last ``K + n`` rows are never a window's first.
Its metrics (``launch.status``): ``reanalyse/seconds_per_sample``, ``reanalyse/share``, ``reanalyse/target_lag``
(the newest params version held minus the mean params version of the last batch's targets), ``replay/rows``.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
import zmq

import algos
from srljax.comm import Message, NameResolver, SampleReceiver, SampleSender
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import BUFFER, PARAMS, SAMPLES, TRAINER
from srljax.system.shell.common import bind_address, checked_trajectory, episode_meta, episodes_from_meta
from srljax.system.shell.worker import Worker
from srljax.system.training.params import ParamsCodec, ParamsFollower

DRAIN_MAX = 64
REPORT_S = 1.0
AHEAD = 1  # batches a buffer may send beyond its share of the env steps inserted
WAIT_MS = 20


def window_rows(traj: Any) -> dict[str, np.ndarray]:
    """A segment ``[T+1, b]`` -> its columns as ``Window`` rows ``[b, T+1, ...]`` (the last row's reward and
    termination are unknown until the next segment: 0 / False; ``unroll_targets`` never reads them)."""
    done = np.logical_or(traj.terminated, traj.truncated)
    shifted = lambda x: np.concatenate([x[1:], np.zeros_like(x[:1])], axis=0)  # noqa: E731 - row j <- row j + 1
    out = {"obs": traj.obs, "action": traj.action.astype(np.int32), "reward": shifted(traj.reward),
           "terminated": shifted(traj.terminated), "searched": ~done,
           "value": traj.extras["search_value"], "policy": traj.extras["search_policy"]}
    return {k: np.swapaxes(v, 0, 1) for k, v in out.items()}


class SearchBufferWorker(Worker):
    role = BUFFER
    serves = (SAMPLES,)

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too)
        self.algo: Any = None
        self.receiver: SampleReceiver | None = None
        self.sender: SampleSender | None = None
        self.follower: ParamsFollower | None = None
        self.store: dict[str, np.ndarray] = {}
        self.versions = np.zeros(0, np.int64)
        self.columns = self.filled = self.next_column = 0
        self.inserted = self.unreported = self.batches = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.pending: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None
        self.next_report = 0.0
        self.reanalysed = self.sampled = 0
        self.reanalyse_s = self._last_reanalyse_s = 0.0
        self.target_lag = 0.0
        self.rng: np.random.Generator | None = None

    def setup(self) -> None:
        cfg, spec = self.cfg, self.spec
        if spec is None:
            raise RuntimeError("the configure message carried no env spec")
        a = cfg.algo
        self.algo = algos.make(cfg, spec)
        rows = a.num_steps + 1
        self.span = a.unroll_steps + a.td_steps + 1
        self.columns = max(1, a.replay_capacity // (cfg.layout.num_buffer_workers * rows))
        c = self.columns
        self.store = {"obs": np.zeros((c, rows, *spec.obs_shape), spec.obs_dtype),
                      "action": np.zeros((c, rows), np.int32), "reward": np.zeros((c, rows), np.float32),
                      "terminated": np.zeros((c, rows), bool), "searched": np.zeros((c, rows), bool),
                      "value": np.zeros((c, rows), np.float32), "policy": np.zeros((c, rows, spec.num_actions), np.float32)}
        self.versions = np.zeros(c, np.int64)
        self.rng = np.random.default_rng([cfg.seed, 4099, self.index])
        self.key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 5000 + self.index)
        self.per_batch = cfg.env_steps_per_update / cfg.layout.num_buffer_workers
        self.reanalyse_count = int(round(a.reanalyse_ratio * self.algo.windows))
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx)
        self.register(SAMPLES, self.receiver.address)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=2)
        self.connect_peers(self.sender, TRAINER, SAMPLES)
        algo, K, n, gamma, sims = self.algo, a.unroll_steps, a.td_steps, a.gamma, a.num_simulations
        from algos.muzero import reanalyse, unroll_targets

        self.targets = jax.jit(lambda w: unroll_targets(w, K, n, gamma))
        if self.reanalyse_count:
            codec = ParamsCodec(algo)
            self.follower = ParamsFollower(self.trial, self.peers_of(TRAINER, PARAMS), codec, self.stats, self.ctx)
            self.follow_peers(self.follower.sub, TRAINER, PARAMS)
            self.search = jax.jit(lambda params, key, obs, w: reanalyse(algo, params, key, obs, w, sims))
        self.log(f"MuZero replay: {c} columns of {rows} rows ({c * rows:,} rows); windows of {self.span} rows, "
                 f"{self.algo.windows} per batch, {self.reanalyse_count} of them reanalysed; samples at "
                 f"{self.receiver.address}")

    # -- loop -------------------------------------------------------------------------------------
    def poll(self) -> None:
        with self.stats.time("wait/samples"):
            msg = self.receiver.recv(timeout_ms=0 if self.pending is None and self._may_sample() else WAIT_MS)
            taken = 0
            while msg is not None:
                self._insert(msg)
                taken += 1
                msg = self.receiver.recv(timeout_ms=0) if taken < DRAIN_MAX else None
        if self.follower is not None:
            self.follower.poll(timeout_ms=0)
        if self.pending is None and self._may_sample():
            self.pending = self._batch()
        if self.pending is not None:
            tree, meta = self.pending
            if self._send(tree, meta):
                self.pending = None
                self.batches += 1
                self.stats.add("batches")
        elif time.monotonic() >= self.next_report:
            self._send({}, {})
        self.stats.gauge("replay/rows", self.filled * (self.cfg.algo.num_steps + 1))

    def _may_sample(self) -> bool:
        return self.filled > 0 and self.batches < self.inserted / self.per_batch + AHEAD

    def _insert(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.extras_spec)
            if set(traj.extras) < {"search_value", "search_policy"}:
                raise ValueError("a segment without the search's extras")
        except ValueError:
            self.stats.add("samples_invalid")
            return
        rows = window_rows(traj)
        b = traj.reward.shape[1]
        slots = (self.next_column + np.arange(b)) % self.columns
        for name, store in self.store.items():
            store[slots] = rows[name]  # b <= columns (MuZeroConfig's distributed problems)
        self.versions[slots] = np.asarray(traj.policy_version, np.int64)
        self.next_column = int((self.next_column + b) % self.columns)
        self.filled = min(self.columns, self.filled + b)
        steps = self.cfg.algo.num_steps * b
        self.inserted += steps
        self.unreported += steps
        self.stats.add("env_steps", steps)
        returns, lengths = episodes_from_meta(msg.meta, max_count=traj.reward.size)
        self.returns += returns.tolist()
        self.lengths += lengths.tolist()

    def _batch(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """One update's windows with their targets; the first ``reanalyse_count`` searched again."""
        n, w = self.algo.windows, self.span
        with self.stats.time("compute/sample"):
            column = self.rng.integers(0, self.filled, n)
            start = self.rng.integers(0, self.cfg.algo.num_steps + 2 - w, n)
            rows = start[:, None] + np.arange(w)
            win = {k: v[column[:, None], rows] for k, v in self.store.items()}
            versions = self.versions[column].astype(np.float64)
        m = self.reanalyse_count if self.follower is not None and self.follower.params is not None else 0
        if self.reanalyse_count and not m:
            self.stats.add("reanalyse_no_params")
        from algos.muzero import Window

        window = Window(**win)
        if m:
            window = self._reanalyse(window, m)
            versions[:m] = self.follower.version
        with self.stats.time("compute/targets"):
            first = window._replace(obs=window.obs[:, 0])
            batch = jax.device_get(self.targets(first))
        self.sampled += n
        newest = self.follower.version if self.follower is not None and self.follower.version >= 0 else versions.max()
        self.target_lag = float(newest - versions.mean())
        self.stats.gauge("reanalyse/target_lag", self.target_lag)
        self.stats.gauge("reanalyse/share", self.reanalysed / max(self.sampled, 1))
        meta = {"reanalysed": m, "windows": n, "target_version": float(versions.mean()),
                "target_lag": self.target_lag, "reanalyse_s": round(self._last_reanalyse_s if m else 0.0, 6)}
        return {k: np.asarray(v) for k, v in batch._asdict().items()}, meta

    def _reanalyse(self, window: Any, m: int) -> Any:
        """The first ``m`` windows searched again, row by row, with the newest params held."""
        started = time.monotonic()
        with self.stats.time("compute/reanalyse"):
            self.key, key = jax.random.split(self.key)
            head = jax.tree.map(lambda x: x[:m], window)
            fresh = jax.device_get(self.search(self.follower.params, key, head.obs, head))
        out = window._replace(value=np.concatenate([fresh.value, window.value[m:]]),
                              policy=np.concatenate([fresh.policy, window.policy[m:]]))
        self._last_reanalyse_s = time.monotonic() - started
        self.reanalyse_s += self._last_reanalyse_s
        self.reanalysed += m
        self.stats.add("reanalysed", m)
        self.stats.gauge("reanalyse/seconds_per_sample", self.reanalyse_s / self.reanalysed)
        return out

    def _send(self, tree: dict[str, Any], extra: dict[str, Any]) -> bool:
        meta = {BUFFER: self.index, "env_steps": self.unreported, **episode_meta(self.returns, self.lengths), **extra}
        if not self.sender.send(tree, timeout_ms=0, meta=meta):
            return False
        self.unreported, self.returns, self.lengths = 0, [], []
        self.next_report = time.monotonic() + REPORT_S
        return True

    # -- reporting ----------------------------------------------------------------------------------
    def waiting(self) -> str:
        if not self.store:
            return "setup"
        if self.pending is not None:
            return "the trainer is full: a batch waits"
        return (f"holds {self.filled}/{self.columns} columns; sent {self.batches} batches for {self.inserted:,} env "
                "steps inserted" + ("" if self.filled else " (filling)"))

    def progress(self) -> int:
        return int(self.stats.counters["env_steps"] + self.stats.counters["batches"])

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"replay/columns": self.filled, "batches_sent": self.batches}
        if self.sampled:
            out |= {"reanalyse/share": self.reanalysed / self.sampled, "reanalyse/target_lag": self.target_lag,
                    "reanalyse/seconds_per_sample": self.reanalyse_s / max(self.reanalysed, 1),
                    "reanalyse/params_version": self.follower.version if self.follower is not None else -1}
        for name, endpoint in (("receiver", self.receiver), ("sender", self.sender)):
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        for thing in (self.receiver, self.sender, self.follower.sub if self.follower is not None else None):
            if thing is not None:
                thing.close()
