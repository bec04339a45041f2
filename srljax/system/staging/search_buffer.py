"""SearchBufferWorker: MuZero's replay in the worker graph, with reanalyse; actors' segments in, window batches out.

    worker = SearchBufferWorker(cfg, index=0, names=names)   # run by a backend for algo=muzero, distributed

The BUFFER role's worker for a search algorithm with a learned model (``srljax.layout.SEARCH_WORKERS``).

* **In** (samples, PULL): actors' segments ``[T+1, b]`` (every move searched: the extras ``search_value`` and
  ``search_policy``, ``algos.muzero.act``), kept in a ``srljax.replay.search.SearchReplay`` of
  ``algo.replay_capacity / layout.num_buffer_workers`` rows (one stored column per env column of a segment, linked to
  the column of the same actor it continues, so windows run on across segment ends; an env's segments reach this
  buffer in turn only with one buffer worker: with several, an actor pushes its segments round robin, so they do not
  link and windows stay inside segments).
* **Reanalyse**: the buffer follows the trainer's params like a policy worker (``ParamsFollower``); of each batch's
  ``algo.windows`` windows, ``round(algo.reanalyse_ratio x windows)`` are searched again with the newest params it
  holds (``SearchReplay.batch``; ``algo.reanalyse_target_every``: a target network's, renewed every that many
  versions), so their policy and value targets (computed here) are that search's (``algo.reanalyse_targets``: both,
  or only the values the n-step targets bootstrap from, or only the move distributions).
* **Out** (samples, PUSH to the trainer): ``UnrollBatch`` trees (one update's windows), at most one batch per
  ``trainer.batch_envs x algo.num_steps / layout.num_buffer_workers`` env steps inserted here (plus one ahead), so
  updates keep pace with env steps; each batch's meta carries the env steps inserted since the last message, the
  finished episodes, how many windows were reanalysed and in how many seconds, and the targets' params versions
  (``target_version``: the reanalysing params' for reanalysed windows, the acting params' for the rest). A report
  (an empty tree) goes every ``REPORT_S`` when no batch does.

A restarted buffer starts empty (its replay is lost; the actors' next segments fill it). Its gauges (``workers/buffer-<i>.jsonl``, ``launch.status``): ``reanalyse/seconds_per_sample`` (seconds per
window reanalysed, compiles excluded), ``reanalyse/share`` (windows reanalysed / windows sent), ``reanalyse/target_lag``
(the newest params version held minus the mean params version of the last batch's targets).
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
import zmq

import algos
from algos.muzero import SEARCH_POLICY, SEARCH_VALUE
from srljax.comm import Message, NameResolver, SampleReceiver, SampleSender
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import ACTOR, BUFFER, PARAMS, SAMPLES, TRAINER
from srljax.replay.search import SearchReplay
from srljax.system.shell.common import bind_address, checked_trajectory, episode_meta, episodes_from_meta
from srljax.system.shell.worker import Worker
from srljax.system.training.params import ParamsCodec, ParamsFollower

DRAIN_MAX = 64
REPORT_S = 1.0
AHEAD = 1  # batches a buffer may send beyond its share of the env steps inserted
WAIT_MS = 20


def reanalyse_params(held: tuple[Any, int] | None, newest: Any, version: int, every: int) -> tuple[Any, int] | None:
    """The (params, version) to reanalyse with (pure): the newest (``newest`` at ``version``; None: none yet) where
    ``every`` is 0, else the ``held`` target until the newest is ``every`` or more versions past it (or behind it: a
    trainer restarted from an older checkpoint)."""
    if newest is None:
        return held
    if held is None or every == 0 or not 0 <= version - held[1] < every:
        return newest, version
    return held


class SearchBufferWorker(Worker):
    role = BUFFER
    serves = (SAMPLES,)

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too)
        self.replay: SearchReplay | None = None
        self.receiver: SampleReceiver | None = None
        self.sender: SampleSender | None = None
        self.follower: ParamsFollower | None = None
        self.per_batch = 1.0
        self.inserted = self.unreported = self.batches = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.pending: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None
        self.next_report = 0.0
        self.reanalysed = self.sampled = 0
        self.reanalyse_s = self.target_lag = 0.0
        self.target: tuple[Any, int] | None = None  # the params reanalysed with and their version

    def setup(self) -> None:
        cfg, spec = self.cfg, self.spec
        if spec is None:
            raise RuntimeError("the configure message carried no env spec")
        a = cfg.algo
        algo = algos.make(cfg, spec)
        columns = max(1, a.replay_capacity // (cfg.layout.num_buffer_workers * (a.num_steps + 1)))
        self.replay = SearchReplay(algo, spec, a, columns, seed=[cfg.seed, 4099, self.index],
                                   key=jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 5000 + self.index))
        self.per_batch = cfg.env_steps_per_update / cfg.layout.num_buffer_workers
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, **self.samples_options(sender=False))
        self.register(SAMPLES, self.receiver.address)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=2, **self.samples_options(sender=True))
        self.connect_peers(self.sender, TRAINER, SAMPLES)
        codec = ParamsCodec(algo)
        with self.stats.time("compute/warm_up"):
            self.replay.warm_up(codec.zeros())
        if self.replay.reanalyse_count:
            self.follower = ParamsFollower(self.trial, self.peers_of(TRAINER, PARAMS), codec, self.stats, self.ctx)
            self.follow_peers(self.follower.sub, TRAINER, PARAMS)
        self.log(f"MuZero replay: {columns} columns of {a.num_steps + 1} rows; windows of {self.replay.span} rows, "
                 f"{algo.windows} per batch, {self.replay.reanalyse_count} of them reanalysed; samples at "
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
            if self._send(*self.pending):
                self.pending = None
                self.batches += 1
                self.stats.add("batches")
        elif time.monotonic() >= self.next_report:
            self._send({}, {})

    def _may_sample(self) -> bool:
        return self.replay.filled > 0 and self.batches < self.inserted / self.per_batch + AHEAD

    def _insert(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.extras_spec)
            if not {SEARCH_VALUE, SEARCH_POLICY} <= set(traj.extras):
                raise ValueError("a segment without the search's extras")
        except ValueError:
            self.stats.add("samples_invalid")
            return
        steps = self.replay.insert(traj, source=msg.meta.get(ACTOR))  # an actor's next segment continues its last
        self.inserted += steps
        self.unreported += steps
        self.stats.add("env_steps", steps)
        returns, lengths = episodes_from_meta(msg.meta, max_count=traj.reward.size)
        self.returns += returns.tolist()
        self.lengths += lengths.tolist()

    def _batch(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        follower = self.follower
        if follower is not None:
            self.target = reanalyse_params(self.target, follower.params, follower.version,
                                           self.cfg.algo.reanalyse_target_every)
            if self.target is None:
                self.stats.add("reanalyse_no_params")
        params, version = self.target or (None, -1)
        with self.stats.time("compute/batch"):
            tree, meta = self._reanalyse(params, version)
        self.sampled += meta["windows"]
        self.reanalysed += meta["reanalysed"]
        self.reanalyse_s += meta["reanalyse_s"]
        newest = follower.version if follower is not None and follower.version >= 0 else meta["target_version"]
        self.target_lag = float(newest - meta["target_version"])
        self.stats.gauge("reanalyse/target_lag", self.target_lag)
        self.stats.gauge("reanalyse/share", self.reanalysed / self.sampled)
        if self.reanalysed:
            self.stats.gauge("reanalyse/seconds_per_sample", self.reanalyse_s / self.reanalysed)
        return tree, {**meta, "target_lag": self.target_lag}

    def _reanalyse(self, params: Any, version: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """One batch, its first windows searched again with ``params`` (its own method: the chaos draw of
        ``bench/liveness.py`` kills a buffer inside it)."""
        return self.replay.batch(params, version)

    def _send(self, tree: dict[str, Any], extra: dict[str, Any]) -> bool:
        meta = {BUFFER: self.index, "env_steps": self.unreported, **episode_meta(self.returns, self.lengths), **extra}
        if not self.sender.send(tree, timeout_ms=0, meta=meta):
            return False
        self.unreported, self.returns, self.lengths = 0, [], []
        self.next_report = time.monotonic() + REPORT_S
        return True

    # -- reporting ----------------------------------------------------------------------------------
    def waiting(self) -> str:
        if self.replay is None:
            return "setup"
        if self.pending is not None:
            return "the trainer is full: a batch waits"
        return (f"holds {self.replay.filled}/{self.replay.columns} columns; sent {self.batches} batches for "
                f"{self.inserted:,} env steps inserted" + ("" if self.replay.filled else " (filling)"))

    def progress(self) -> int:
        return int(self.stats.counters["env_steps"] + self.stats.counters["batches"])

    def metrics(self) -> dict[str, Any]:
        """The reanalyse figures are the stats' gauges (``reanalyse/...``, beside these in ``workers/buffer-<i>.jsonl``
        and on the Prometheus endpoint ``launch.status`` reads)."""
        out: dict[str, Any] = {"batches_sent": self.batches,
                               "reanalyse_params_version": self.follower.version if self.follower is not None else -1,
                               "reanalyse_target_version": self.target[1] if self.target is not None else -1}
        if self.replay is not None:
            out["replay_rows"] = self.replay.filled * self.replay.rows
        for name, endpoint in (("receiver", self.receiver), ("sender", self.sender)):
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        for thing in (self.receiver, self.sender, self.follower):
            if thing is not None:
                thing.close()
