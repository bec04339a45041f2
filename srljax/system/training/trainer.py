"""TrainerWorker: pulls segments, assembles batches of its own size, runs the shared ``Learner``, publishes params.

    worker = TrainerWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

Segments ``[T+1, b]`` from any actors or buffers are checked, counted as env steps, and dropped (counted)
when older than ``trainer.max_policy_lag``; a batch is ``cfg.batch_envs`` columns from any segments, the
remainder kept. A group of ``trainer.num_hosts`` processes is one ``jax.distributed`` group
(``srljax.parallel.multihost``); only trainer 0 publishes, logs and says ``done``. The update is dispatched
and not waited for: meanwhile the trainer receives, cuts the next batch and starts its copy to the devices.
Params go out every ``trainer.publish_every`` updates, when idle with unpublished updates, and every second.
With ``layout.deterministic`` update k takes every actor's k-th segment, in actor order. Checkpoints hold the
run (``Learner.save``); ``configure`` with ``resume`` restores the newest before compiling.
``docs/architecture.md``, "Data flow" and "Run state and resume".
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import jax
import numpy as np
import zmq

from algos.base import segment_extras_spec
from srljax.comm import Message, ParamsPublisher, SampleReceiver
from srljax.comm.sockets import context
from srljax.layout import ACTOR, PARAMS, SAMPLES, TRAINER
from srljax.learning.learner import Learner
from srljax.learning.rollout import concat_segments, split_segments, zeros_trajectory
from srljax.storage.run_dir import rollback_metrics
from srljax.system.shell.bounds import stream_limits
from srljax.system.shell.common import bind_address, bind_host, checked_trajectory, episodes_from_meta
from srljax.system.training.params import ParamsCodec
from srljax.system.shell.worker import Worker
from srljax.telemetry.metrics import EpisodeWindow, MetricsLogger, UpdateRecords
from srljax.types import Trajectory

REPUBLISH_S = 1.0
SAMPLE_HWM = 4  # segments queued at the trainer; beyond this actors feel backpressure
DRAIN_MAX = 64  # segments taken per poll at most, so control and publishing stay timely
IDLE_POLL_MS = 50  # the longest the loop sleeps when neither a sample nor an update's end wakes it


class TrainerWorker(Worker):
    role = TRAINER
    placement = TRAINER
    serves = (SAMPLES, PARAMS)

    def setup(self) -> None:
        cfg = self.cfg
        if self.spec is None:
            raise RuntimeError("the configure message carried no env spec")
        self.hosts = cfg.trainer.num_hosts
        if self.hosts > 1:
            from srljax.parallel import multihost as distributed

            self.log(f"joining the trainer group as process {self.index} of {self.hosts}")
            self.group = distributed.join_via_names(self.names, cfg.name, cfg.trial, process_id=self.index,
                                                    num_processes=self.hosts, host=bind_host())
        self.primary = self.index % self.hosts == 0  # several policies: trainer i is policy i's one process
        self.share = cfg.batch_envs // self.hosts  # columns this process feeds per update
        self.learner = self.make_learner()
        meta: dict[str, Any] = {}
        if self.resume:  # every process of a group restores the same step (orbax reads each array once)
            _, meta = self.learner.restore()
            if self.primary:  # a restarted trainer: the lines its predecessor logged after the checkpoint go
                rollback_metrics(Path(cfg.run_dir) / "metrics.jsonl", self.learner.version)
            self.log(f"resumed from the checkpoint of update {self.learner.version} "
                     f"({int(meta.get('env_steps', 0)):,} env steps)")
        elif self.restarted and self.primary:  # lost before its first checkpoint: it trains again from update 0,
            rollback_metrics(Path(cfg.run_dir) / "metrics.jsonl", 0)  # and each update keeps one line
        self.learner.run_state = self._run_state
        self.extras_spec = segment_extras_spec(self.learner.algo)  # what segments carry
        self.learner.compile(self.example_batch())
        self.codec = ParamsCodec(self.learner.algo)
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, hwm=SAMPLE_HWM,
                                       max_bytes=self.samples_limit())
        self.register(SAMPLES, self.receiver.address)
        self.update_end = UpdateEnd(context(self.ctx))
        self.poller = zmq.Poller()
        self.poller.register(self.receiver.sock, zmq.POLLIN)
        self.poller.register(self.update_end.sock, zmq.POLLIN)
        self.publisher = self.logger = None
        if self.primary:
            self.publisher = ParamsPublisher(bind_address(cfg), self.trial, ctx=self.ctx)
            self.register(PARAMS, self.publisher.address)
            self.logger = MetricsLogger(cfg, total=cfg.total_env_steps, elapsed=float(meta.get("elapsed_s", 0.0)),
                                        wandb_id=meta.get("wandb_id"), prometheus=self.exporter)
        self.pending: list[Trajectory] = []
        self.pending_columns = 0
        # deterministic layouts: each actor's segments (with their meta) in arrival order, cut in actor order
        self.lockstep: dict[int, deque[tuple[Trajectory, dict[str, Any]]]] | None = (
            {i: deque() for i in range(cfg.layout.num_actors)} if cfg.layout.deterministic else None)
        self.placed: Trajectory | None = None  # the next batch, on its way to the devices
        self.running: dict[str, Any] | None = None  # metrics of the dispatched update, until it ends
        self.episodes = EpisodeWindow(cfg.log.window)
        self.episodes.load_state(meta.get("episodes", {}))
        # this process's counts; a resumed group's totals so far are carried by process 0
        self.env_steps = int(meta.get("env_steps", 0)) if self.primary else 0
        self.dropped_stale = int(meta.get("dropped_stale_columns", 0)) if self.primary else 0
        self.total_env_steps = self.env_steps  # the group's, as of the last metrics line
        self.records = UpdateRecords(env_steps=self.env_steps)
        self.lags: list[int] = []  # per column of the batches trained on since the last metrics line
        self.done_sent = False
        self.wire_params: tuple[int, list[np.ndarray]] | None = None
        self.next_publish = 0.0
        self.published = -1  # the newest version published
        self.log(f"samples at {self.receiver.address}; batch {cfg.batch_envs} env columns x {cfg.algo.num_steps} "
                 f"steps ({self.share} from this process of {self.hosts}), {cfg.num_updates} updates")

    def make_learner(self) -> Learner:
        """The learner of ``setup`` (a subclass may build its algorithm: ``PolicyTrainerWorker``)."""
        return Learner(self.cfg, self.spec)

    def may_update(self) -> bool:
        """Whether the next update may start now (``MemberTrainerWorker``: not while at a PBT ready point)."""
        return True

    def example_batch(self) -> Trajectory:
        """A batch shaped like this process's (zeros), to compile the update for in ``setup``."""
        return zeros_trajectory(self.spec, self.cfg.algo.num_steps, self.extras_spec, self.share)

    def samples_limit(self) -> int:
        """The largest frame the samples socket accepts (``srljax.system.shell.bounds``)."""
        return stream_limits(self.cfg, self.spec, self.extras_spec)["samples"]

    def ready_info(self) -> dict[str, Any]:
        return {"extras_spec": {k: [list(shape), dtype] for k, (shape, dtype) in self.extras_spec.items()}}

    def poll(self) -> None:
        if self.running is not None and self.update_end.ended():
            self._finish_update()
        if self.primary and self.running is None and time.monotonic() >= self.next_publish:
            self._publish(fresh=self.wire_params is None)  # again: PUB drops, subscribers join late
        if self.learner.version >= self.cfg.num_updates and self.running is None:
            if self.primary and not self.done_sent:
                self.done_sent = True
                self.tell_controller("done", {"env_steps": self.total_env_steps, "updates": self.learner.version})
            time.sleep(0.05)
            return
        with self.stats.time("wait/samples_or_update"):
            # Sleep until a sample arrives or the running update ends (``UpdateEnd`` rings): no
            # spinning, which on XLA:CPU would take cycles from the update itself.
            woken = dict(self.poller.poll(IDLE_POLL_MS))
        if self.receiver.sock in woken:
            taken = 0
            msg = self.receiver.recv(timeout_ms=0)
            while msg is not None:
                self._take(msg)
                taken += 1
                msg = self.receiver.recv(timeout_ms=0) if taken < DRAIN_MAX else None
        self.stats.gauge("batch/fill", self.pending_columns / self.share)
        if self.placed is None and self.learner.version + (self.running is not None) < self.cfg.num_updates:
            batch = self._cut_batch()
            if batch is not None:
                self.placed = self.learner.put(batch)  # the copy overlaps the running update
                # >= 0: columns a restarted trainer took from the versions it lost count as fresh
                self.placed_lags = np.maximum(self.learner.version - batch.policy_version.astype(np.int64), 0)
        if self.running is None and self.placed is not None and self.may_update():
            with self.stats.time("compute/dispatch"):
                self.running = self.learner.step(self.placed)
            self.update_end.watch(self.running)
            self.update_started = time.monotonic()
            self.stats.begin("compute/update")  # its share of wall time is the trainer's busy fraction
            self.lags += self.placed_lags.tolist()
            self.placed = None
        elif self.running is None and self.primary and self.published < self.learner.version:
            # Idle, waiting for samples, with updates the actors have not seen: publishing now costs
            # nothing, and actors throttled on an old version (publish_every > 1) may be what it waits for.
            self._publish()
            self.stats.add("publishes_idle")

    def _take(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.extras_spec)
        except ValueError:
            self.stats.add("samples_invalid")
            return
        columns = traj.reward.shape[1]
        lag = self.learner.version - int(traj.policy_version.min())
        if lag < 0:  # acted with params not published yet
            if not self.restarted:  # not from this trial's actors
                self.stats.add("samples_invalid")
                return
            # a restarted trainer went back to its checkpoint: these were acted with the params of the
            # updates it lost, until the actors follow it down (params.FOLLOW_DOWN_S); take them as fresh
            self.stats.add("samples_from_lost_versions")
            lag = 0
        actor = msg.meta.get(ACTOR)
        if self.lockstep is not None and actor not in self.lockstep:
            self.stats.add("samples_invalid")  # a deterministic batch is cut by actor index
            return
        self.env_steps += self.cfg.algo.num_steps * columns
        self.stats.add("env_steps", self.cfg.algo.num_steps * columns)
        self.stats.add("samples")
        episodes = episodes_from_meta(msg.meta, max_count=self.cfg.algo.num_steps * columns)
        if self.lockstep is not None:  # counted when its batch is cut, in actor order
            self.lockstep[actor].append((traj, {"episodes": episodes}))
            self.pending_columns += columns
            self.stats.count_value("lag/received", lag)
            return
        self.episodes.add(*episodes)
        self.stats.count_value("lag/received", lag)
        if lag > self.cfg.trainer.max_policy_lag:
            self._drop(columns)
            return
        self.pending.append(traj)
        self.pending_columns += columns

    def _drop(self, columns: int) -> None:
        self.dropped_stale += columns
        self.stats.add("dropped_stale_columns", columns)

    def _cut_batch(self) -> Trajectory | None:
        """This process's next ``share`` columns, if it holds them; stale columns are dropped first."""
        if self.lockstep is not None:
            return self._cut_lockstep()
        if self.pending_columns < self.share:
            return None
        merged = concat_segments(self.pending)
        fresh = self.learner.version - merged.policy_version.astype(np.int64) <= self.cfg.trainer.max_policy_lag
        if not fresh.all():  # went stale while waiting for the rest of a batch
            self._drop(int((~fresh).sum()))
            keep = np.flatnonzero(fresh)
            merged = Trajectory(*(x[:, keep] for x in merged[:5]), extras={k: v[:, keep] for k, v in merged.extras.items()},
                                policy_version=merged.policy_version[keep])
            self.pending, self.pending_columns = [merged], int(keep.size)
            if self.pending_columns < self.share:
                return None
        batch, rest = split_segments(merged, self.share)
        self.pending = [rest] if rest.reward.shape[1] else []
        self.pending_columns -= self.share
        return batch

    def _cut_lockstep(self) -> Trajectory | None:
        """Deterministic layouts: the next segment of every actor, in actor order, once all of them are here."""
        if not all(self.lockstep.values()):
            return None
        taken = [self.lockstep[i].popleft() for i in sorted(self.lockstep)]
        for _, meta in taken:
            self.episodes.add(*meta["episodes"])
        batch = concat_segments([traj for traj, _ in taken])
        self.pending_columns -= batch.reward.shape[1]
        return batch

    def _finish_update(self, final: bool = False) -> None:
        """Read the ended update's metrics, publish, log its line, then checkpoint (a checkpoint of update
        N exists only after N's line: ``--resume`` cuts ``metrics.jsonl`` back to it and continues with
        N+1). ``final``: the trial stops now, so the line is written whatever ``log.log_every`` says."""
        train_metrics = jax.device_get(self.running)
        self.running = None
        self.stats.end("compute/update")
        self.stats.add("updates")
        self.stats.sample("time/update_s", time.monotonic() - self.update_started)
        version, cfg = self.learner.version, self.cfg
        last = version >= cfg.num_updates or final
        if self.primary and (version % cfg.trainer.publish_every == 0 or last):
            self._publish()
        if version % cfg.log.log_every == 0 or last:
            self._log_metrics(train_metrics)
        self.learner.maybe_save()

    def _publish(self, fresh: bool = True) -> None:
        """Publish the current params (``fresh``), or the last published ones again."""
        version = self.learner.version if fresh else self.wire_params[0]
        if self.wire_params is None or self.wire_params[0] != version:
            # private copies: sends are zero-copy and jax may reuse device buffers
            self.wire_params = (version, [np.array(x) for x in self.codec.to_wire(self.learner.policy_params())])
        self.publisher.publish(version, self.wire_params[1])
        self.next_publish = time.monotonic() + REPUBLISH_S
        self.published = version
        self.stats.add("publishes")

    def _log_metrics(self, train_metrics: dict[str, Any]) -> None:
        env_steps, dropped = self.env_steps, self.dropped_stale
        if self.hosts > 1:  # every process logs at the same versions, so all of them join this collective
            from jax.experimental import multihost_utils

            totals = multihost_utils.process_allgather(np.array([env_steps, dropped], np.int64)).sum(axis=0)
            env_steps, dropped = int(totals[0]), int(totals[1])
        self.total_env_steps = env_steps
        lags = np.asarray(self.lags or [0])
        self.lags = []
        if self.logger is None:
            return
        self.logger.write(self.records.record(
            self.learner.version, env_steps, self.episodes.summary(), train_metrics,
            **{"lag/mean": float(lags.mean()), "lag/max": int(lags.max()), "dropped_stale_columns": dropped,
               "worker_restarts": self.trial_restarts}))

    def _run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The trainer's part of a checkpoint (JSON only; written by process 0 of a group)."""
        meta = {"env_steps": self.total_env_steps if self.hosts > 1 else self.env_steps,
                "dropped_stale_columns": self.dropped_stale, "episodes": self.episodes.state()}
        if self.logger is not None:
            meta |= {"wandb_id": self.logger.wandb_id, "elapsed_s": round(self.logger.elapsed, 3)}
        return {}, meta

    def progress(self) -> int:
        learner = getattr(self, "learner", None)
        return learner.version if learner is not None else 0

    def waiting(self) -> str:
        if getattr(self, "running", None) is not None:
            return "update running"
        if getattr(self, "learner", None) is None:
            return "setup"
        if self.learner.version >= self.cfg.num_updates:
            return "done"
        return f"samples: holds {self.pending_columns}/{self.share} columns"

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/pending_columns": getattr(self, "pending_columns", 0)}
        if getattr(self, "learner", None) is not None:
            out["policy_version"] = self.learner.version
        if getattr(self, "receiver", None) is not None:
            out.update({f"samples/{k}": v for k, v in self.receiver.counters().items()})
        return out

    def close(self) -> None:
        if getattr(self, "running", None) is not None:  # stopped mid-update: its line before its checkpoint
            self._finish_update(final=True)
        if getattr(self, "learner", None) is not None:
            self.learner.close()  # final checkpoint (cfg.checkpoint.final); a collective in a group
        for name in ("logger", "receiver", "publisher", "update_end"):
            thing = getattr(self, name, None)
            if thing is not None:
                thing.close()


class UpdateEnd:
    """Rings a socket the trainer's poller watches when a dispatched update's outputs are ready.

    One thread blocks on each watched update's arrays (``jax.block_until_ready``) and then writes
    one byte to an inproc PAIR, so the loop sleeps in ``zmq.Poller`` on samples and the update's
    end together instead of polling ``is_ready()`` in a tight loop.
    """

    def __init__(self, ctx: zmq.Context) -> None:
        address = f"inproc://srljax-update-end-{id(self)}"
        self.sock = ctx.socket(zmq.PAIR)  # the loop's end
        self.sock.bind(address)
        self._ring = ctx.socket(zmq.PAIR)  # the waiter thread's end; only that thread uses it
        self._ring.connect(address)
        self._updates: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._wait_loop, name="update-end", daemon=True)
        self._thread.start()

    def watch(self, outputs: Any) -> None:
        self._updates.put(outputs)

    def ended(self) -> bool:
        """True once (per watched update) when it has ended; never blocks."""
        try:
            self.sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _wait_loop(self) -> None:
        while (outputs := self._updates.get()) is not None:
            try:
                jax.block_until_ready(outputs)
            except Exception:  # noqa: BLE001 - rung all the same: the loop's ``device_get`` raises it
                pass
            self._ring.send(b"")

    def close(self) -> None:
        self._updates.put(None)
        self._thread.join(timeout=10)
        self._ring.close(linger=0)
        self.sock.close(linger=0)
