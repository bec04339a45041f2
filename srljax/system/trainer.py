"""TrainerWorker: pulls segments, assembles batches, runs the shared ``Learner``, publishes params.

    worker = TrainerWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

Segments ``[T+1, b]`` from actors (or buffers) are checked against the env spec, counted as
``T x b`` env steps, and dropped (and counted) when their oldest policy version lags the
learner by more than ``trainer.max_policy_lag``. Once ``cfg.batch_envs`` columns are held they
are joined into one ``Trajectory [T+1, batch_envs]`` and passed to ``Learner.step``: the same
jitted update, state and checkpoints as ``srljax.train``. Params go out on the PUB every
``trainer.publish_every`` updates and again every second (PUB drops; late subscribers).
Each ``log.log_every`` updates a line goes to ``metrics.jsonl`` with the true returns the
actors reported. After ``cfg.num_updates`` updates the trainer tells the controller ``done``;
the final checkpoint is written on stop.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from srljax.comm import Message, ParamsPublisher, SampleReceiver
from srljax.learner import Learner
from srljax.metrics import EpisodeWindow, MetricsLogger
from srljax.rollout import concat_segments, split_segments
from srljax.system.common import bind_address, checked_trajectory, env_spec, episodes_from_meta, params_prefix
from srljax.system.params import ParamsCodec
from srljax.system.worker import Worker
from srljax.types import Trajectory

REPUBLISH_S = 1.0
SAMPLE_HWM = 4  # segments queued at the trainer; beyond this actors feel backpressure


class TrainerWorker(Worker):
    role = "trainer"

    def setup(self) -> None:
        cfg = self.cfg
        self.spec = env_spec(cfg)
        self.learner = Learner(cfg, self.spec)
        self.codec = ParamsCodec(self.learner.algo)
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, hwm=SAMPLE_HWM)
        self.register("samples", self.receiver.address)
        self.publisher = ParamsPublisher(bind_address(cfg), self.trial, ctx=self.ctx)
        self.names.add(f"{params_prefix(cfg)}{self.role}-{self.index}", self.publisher.address)
        self.pending: list[Trajectory] = []
        self.pending_columns = 0
        self.episodes = EpisodeWindow(cfg.log.window)
        self.logger = MetricsLogger(cfg, total=cfg.total_env_steps)
        self.env_steps = self.dropped_stale = 0
        self.lags: list[int] = []  # per column of the batches trained on since the last metrics line
        self.last_log = (time.monotonic(), 0)
        self.done_sent = False
        self.wire_params: tuple[int, list[np.ndarray]] | None = None
        self.next_publish = 0.0
        self.log(f"samples at {self.receiver.address}, params at {self.publisher.address}; "
                 f"batch {cfg.batch_envs} envs x {cfg.algo.num_steps} steps, {cfg.num_updates} updates")

    def poll(self) -> None:
        if time.monotonic() >= self.next_publish:
            self._publish()
        if self.learner.version >= self.cfg.num_updates:
            if not self.done_sent:
                self.done_sent = True
                self.tell_controller("done", {"env_steps": self.env_steps, "updates": self.learner.version})
            time.sleep(0.05)
            return
        with self.stats.time("wait/samples"):
            msg = self.receiver.recv(timeout_ms=50)
        if msg is not None:
            self._take(msg)
        self.stats.gauge("batch/fill", self.pending_columns / self.cfg.batch_envs)
        if self.pending_columns >= self.cfg.batch_envs:
            self._update()

    def _take(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.learner.algo.extras_spec)
        except ValueError:
            self.stats.add("samples_invalid")
            return
        columns = traj.reward.shape[1]
        lag = self.learner.version - int(traj.policy_version.min())
        if lag < 0:  # acted with params not published yet: not from this trial's actors
            self.stats.add("samples_invalid")
            return
        self.env_steps += self.cfg.algo.num_steps * columns
        self.stats.add("env_steps", self.cfg.algo.num_steps * columns)
        self.stats.add("samples")
        self.episodes.add(*episodes_from_meta(msg.meta))
        self.stats.count_value("lag/received", lag)
        if lag > self.cfg.trainer.max_policy_lag:
            self.dropped_stale += columns
            self.stats.add("dropped_stale_columns", columns)
            return
        self.pending.append(traj)
        self.pending_columns += columns

    def _update(self) -> None:
        batch, rest = split_segments(concat_segments(self.pending), self.cfg.batch_envs)
        self.pending = [rest] if rest.reward.shape[1] else []
        self.pending_columns -= self.cfg.batch_envs
        lags = self.learner.version - batch.policy_version.astype(np.int64)
        with self.stats.time("compute/update"):
            train_metrics = jax.device_get(self.learner.step(batch))
        self.stats.add("updates")
        self.lags += lags.tolist()
        version, cfg = self.learner.version, self.cfg
        if version % cfg.trainer.publish_every == 0 or version >= cfg.num_updates:
            self._publish()
        if version % cfg.log.log_every == 0 or version >= cfg.num_updates:
            self._log_metrics(train_metrics)

    def _publish(self) -> None:
        version = self.learner.version
        if self.wire_params is None or self.wire_params[0] != version:
            # private copies: sends are zero-copy and jax may reuse device buffers
            self.wire_params = (version, [np.array(x) for x in self.codec.to_wire(self.learner.policy_params())])
        self.publisher.publish(version, self.wire_params[1])
        self.next_publish = time.monotonic() + REPUBLISH_S
        self.stats.add("publishes")

    def _log_metrics(self, train_metrics: dict[str, Any]) -> None:
        now = time.monotonic()
        last_time, last_steps = self.last_log
        lags = np.asarray(self.lags or [0])
        record = {
            "update": self.learner.version,
            "env_steps": self.env_steps,
            "sps": (self.env_steps - last_steps) / max(now - last_time, 1e-9),
            **self.episodes.summary(),
            **{k: float(v) for k, v in train_metrics.items()},
            "lag/mean": float(lags.mean()),
            "lag/max": int(lags.max()),
            "dropped_stale_columns": self.dropped_stale,
        }
        self.last_log, self.lags = (now, self.env_steps), []
        self.logger.write(record)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/pending_columns": getattr(self, "pending_columns", 0)}
        if getattr(self, "learner", None) is not None:
            out["policy_version"] = self.learner.version
        if getattr(self, "receiver", None) is not None:
            out.update({f"samples/{k}": v for k, v in self.receiver.counters().items()})
        return out

    def close(self) -> None:
        if getattr(self, "learner", None) is not None:
            self.learner.close()  # final checkpoint (cfg.checkpoint.final)
        for name in ("logger", "receiver", "publisher"):
            thing = getattr(self, name, None)
            if thing is not None:
                thing.close()
