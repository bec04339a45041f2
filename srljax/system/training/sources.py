"""The trainer's sample source for segments: columns from actors (or buffers) cut into batches of its own size.

    source = SegmentSource(worker, policy=None, lockstep=False)   # chosen by ``parts.trainer_parts``

Segments ``[T+1, b]`` are checked against the env spec, counted as ``T x b`` env steps, and dropped (and
counted) when their oldest policy version lags the learner by more than ``trainer.max_policy_lag`` or is below
``floor`` (PSRO's graph: the first version of the best response now training), both when they arrive and when a
batch is cut. A batch is ``share`` columns (``cfg.batch_envs`` over the
trainer group's processes), whatever the number of actors, envs per actor and buffers: columns from any
segments, the remainder kept for the next batch, joined into reused host arrays (``JoinPool``; one is
written again only after the update that read it has ended). One policy of several takes only the segments stamped
with its name (``POLICY_KEY``; others: ``samples_wrong_policy``).

``lockstep`` (``layout.deterministic``): update k takes the next segment of every actor, in actor order,
and their episodes enter the statistics window then, in that order, so ``metrics.jsonl`` does not depend
on which segment arrived first.

``SampleCounts`` holds what both sources count (env steps, stale columns dropped, the episode window) and
what of it a checkpoint keeps; ``ReplaySource`` (``replay_source.py``) is Ape-X's source.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from srljax.comm import Message
from srljax.layout import ACTOR
from srljax.learning.policies import POLICY_KEY
from srljax.learning.rollout import JoinPool, zeros_trajectory
from srljax.storage.samples_record import SampleRecorder
from srljax.system.shell.bounds import stream_limits, stream_message_limits
from srljax.system.shell.common import checked_trajectory, episodes_from_meta, wins_from_meta
from srljax.system.shell.worker import Worker
from srljax.telemetry.metrics import EpisodeWindow
from srljax.types import Trajectory

if TYPE_CHECKING:
    from srljax.learning.learner import Learner


def _ended(outputs: Any) -> bool:
    """Whether the computation that made ``outputs`` has finished (so it no longer reads its inputs)."""
    return all(x.is_ready() for x in jax.tree.leaves(outputs) if isinstance(x, jax.Array))


class SampleCounts:
    """What a source counts (this process's; a resumed group's totals so far are carried by process 0)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.chunk = 1  # updates per compiled call (``ReplaySource``: ``algo.updates_per_call``)
        self.env_steps = 0
        self.dropped_stale = 0
        self.total_env_steps = 0  # the group's, as of the last metrics line
        self.episodes: EpisodeWindow | None = None  # from ``start``
        self.pending_columns = 0  # columns held towards the next batch (none for whole batches)

    def start_counts(self, meta: dict[str, Any]) -> None:
        """The counters, from a restored checkpoint's ``meta`` ({} when starting afresh)."""
        primary = self.worker.primary
        self.episodes = EpisodeWindow(self.worker.cfg.log.window)
        self.episodes.load_state(meta.get("episodes", {}))
        self.env_steps = int(meta.get("env_steps", 0)) if primary else 0
        self.dropped_stale = int(meta.get("dropped_stale_columns", 0)) if primary else 0
        self.total_env_steps = self.env_steps

    def state(self) -> dict[str, Any]:
        """The source's part of a checkpoint's meta."""
        return {"env_steps": self.total_env_steps if self.worker.hosts > 1 else self.env_steps,
                "dropped_stale_columns": self.dropped_stale, "episodes": self.episodes.state()}

    # -- hooks a source may leave as they are ---------------------------------------------------------
    def prepare(self) -> None:
        """Before the learner exists (``ReplaySource``: set aside checkpoints without their replay)."""

    def announce(self) -> None:
        """Log what the source does, once set up."""

    def after_receive(self) -> None:
        """After the samples socket was drained (``ReplaySource``: grant credit)."""

    def ahead(self) -> bool:
        """Whether a placed batch must wait (``ReplaySource``: the replay ratio)."""
        return False

    def saved(self) -> None:
        """A checkpoint was just written."""

    def metrics(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """After the learner's final checkpoint."""


class SegmentSource(SampleCounts):
    def __init__(self, worker: Worker, policy: str | None = None, lockstep: bool = False) -> None:
        super().__init__(worker)
        self.policy = policy  # one policy of several: only its segments
        self.deterministic = lockstep
        self.pending: list[Trajectory] = []
        # deterministic layouts: each actor's segments (with their meta) in arrival order, cut in actor order
        self.lockstep: dict[int, deque[tuple[Trajectory, dict[str, Any]]]] | None = None
        self.placed_lags = np.zeros(0, np.int64)  # per column of the placed batch
        self.lags: list[int] = []  # per column of the batches trained on since the last metrics line
        self.recorder: SampleRecorder | None = None  # layout.record_samples: every batch and the state after it
        # batches are joined into reused arrays; one is rewritten only after the update that read it has ended
        # (``jax.device_put`` of a host array may alias it on the CPU backend, and copies it asynchronously elsewhere)
        self.pool = JoinPool(keep=3)
        self.placed_buffer: Trajectory | None = None  # the host arrays of the placed batch
        self.floor = 0  # columns acted with an older params version are dropped (PSRO: before its best response)

    def start(self, meta: dict[str, Any]) -> None:
        self.start_counts(meta)
        self.pending, self.pending_columns = [], 0
        if self.deterministic:
            self.lockstep = {i: deque() for i in range(self.worker.cfg.layout.num_actors)}
        if self.worker.cfg.layout.record_samples:
            w = self.worker
            self.recorder = SampleRecorder(Path(w.cfg.run_dir) / "samples" / f"{w.role}-{w.index}")
            w.log(f"recording every batch and the train state after each update in {self.recorder.folder} "
                  "(python -m launch.replay RUN_DIR replays them)")

    def example_batch(self) -> Trajectory:
        """A batch shaped like this process's (zeros), to compile the update for."""
        w = self.worker
        return zeros_trajectory(w.spec, w.cfg.algo.num_steps, w.extras_spec, w.share)

    def samples_limit(self) -> int:
        """The largest frame the samples socket accepts (``srljax.system.shell.bounds``)."""
        w = self.worker
        return stream_limits(w.cfg, w.spec, w.extras_spec)["samples"]

    def samples_message_limit(self) -> int:
        """The largest message (a segment, all its leaves) the samples socket accepts."""
        w = self.worker
        return stream_message_limits(w.cfg, w.spec, w.extras_spec)["samples"]

    # -- in ----------------------------------------------------------------------------------------------
    def take(self, msg: Message) -> None:
        w = self.worker
        if self.policy is not None and msg.meta.get(POLICY_KEY) != self.policy:
            w.stats.add("samples_wrong_policy")
            return
        num_steps = w.cfg.algo.num_steps
        try:
            traj = checked_trajectory(msg.tree, w.spec, num_steps, w.extras_spec)
        except ValueError:
            w.stats.add("samples_invalid")
            return
        columns = traj.reward.shape[1]
        lag = w.learner.version - int(traj.policy_version.min())
        if lag < 0:  # acted with params not published yet
            if not w.restarted:  # not from this trial's actors
                w.stats.add("samples_invalid")
                return
            # a restarted trainer went back to its checkpoint: these were acted with the params of the
            # updates it lost, until the actors follow it down (params.FOLLOW_DOWN_S); take them as fresh
            w.stats.add("samples_from_lost_versions")
            lag = 0
        actor = msg.meta.get(ACTOR)
        if self.lockstep is not None and actor not in self.lockstep:
            w.stats.add("samples_invalid")  # a deterministic batch is cut by actor index
            return
        self.env_steps += num_steps * columns
        w.stats.add("env_steps", num_steps * columns)
        w.stats.add("samples")
        episodes = episodes_from_meta(msg.meta, max_count=num_steps * columns)
        self.episodes.add_wins(wins_from_meta(msg.meta, max_count=num_steps * columns))
        if self.lockstep is not None:  # counted when its batch is cut, in actor order
            self.lockstep[actor].append((traj, {"episodes": episodes}))
            self.pending_columns += columns
            w.stats.count_value("lag/received", lag)
            return
        self.episodes.add(*episodes)
        w.stats.count_value("lag/received", lag)
        if lag > w.cfg.trainer.max_policy_lag or int(traj.policy_version.min()) < self.floor:
            self._drop(columns)
            return
        self.pending.append(traj)
        self.pending_columns += columns

    def after_receive(self) -> None:
        self.worker.stats.gauge("batch/fill", self.pending_columns / self.worker.share)

    def _drop(self, columns: int) -> None:
        self.dropped_stale += columns
        self.worker.stats.add("dropped_stale_columns", columns)

    # -- batches -------------------------------------------------------------------------------------------
    def next_batch(self, learner: Learner) -> Trajectory | None:
        """The next batch on its way to the devices (``Learner.put``: the copy overlaps the running update)."""
        batch = self.cut()
        if batch is None:
            return None
        if self.recorder is not None:
            self.recorder.batch(learner.version, batch)
        placed = learner.put(batch)
        self.placed_buffer = batch
        # >= 0: columns a restarted trainer took from the versions it lost count as fresh
        self.placed_lags = np.maximum(learner.version - batch.policy_version.astype(np.int64), 0)
        return placed

    def dispatch(self, learner: Learner, placed: Trajectory) -> Any:
        running = learner.step(placed)
        self.lags += self.placed_lags.tolist()
        if self.placed_buffer is not None:
            self.pool.hold(self.placed_buffer, lambda: _ended(running))
            self.placed_buffer = None
        return running

    def cut(self) -> Trajectory | None:
        """This process's next ``share`` columns, if it holds them; stale columns are dropped first."""
        if self.lockstep is not None:
            return self._cut_lockstep()
        w = self.worker
        if self.pending_columns < w.share:
            return None
        kept = []
        for seg in self.pending:
            fresh = ((w.learner.version - seg.policy_version.astype(np.int64) <= w.cfg.trainer.max_policy_lag)
                     & (seg.policy_version >= self.floor))
            if not fresh.all():  # went stale while waiting for the rest of a batch
                self._drop(int((~fresh).sum()))
                self.pending_columns -= int((~fresh).sum())
                keep = np.flatnonzero(fresh)
                if not keep.size:
                    continue
                seg = Trajectory(*(x[:, keep] for x in seg[:5]), extras={k: v[:, keep] for k, v in seg.extras.items()},
                                 policy_version=seg.policy_version[keep])
            kept.append(seg)
        self.pending = kept
        if self.pending_columns < w.share:
            return None
        batch, self.pending = self.pool.join(self.pending, w.share)
        self.pending_columns -= w.share
        return batch

    def _cut_lockstep(self) -> Trajectory | None:
        """Deterministic layouts: the next segment of every actor, in actor order, once all of them are here."""
        if not all(self.lockstep.values()):
            return None
        taken = [self.lockstep[i].popleft() for i in sorted(self.lockstep)]
        for _, meta in taken:
            self.episodes.add(*meta["episodes"])
        segments = [traj for traj, _ in taken]
        batch, _ = self.pool.join(segments, sum(s.reward.shape[1] for s in segments))
        self.pending_columns -= batch.reward.shape[1]
        return batch

    def ended(self, outputs: Any, first: int) -> dict[str, Any]:
        """The ended update's metrics, from its outputs (already on the host)."""
        if self.recorder is not None:
            learner = self.worker.learner
            digest = self.recorder.state(learner.version, jax.device_get(learner.state))
            if learner.version >= self.worker.cfg.num_updates:
                self.worker.log(f"train state sha256 after update {learner.version}: {digest}")
        return outputs

    # -- out -------------------------------------------------------------------------------------------------
    def line(self, version: int) -> tuple[int, dict[str, Any]]:
        """The group's env steps and this source's columns of a metrics line. Every process of a group logs at the
        same versions, so all of them join the collective here."""
        env_steps, dropped = self.env_steps, self.dropped_stale
        if self.worker.hosts > 1:
            from jax.experimental import multihost_utils

            totals = multihost_utils.process_allgather(np.array([env_steps, dropped], np.int64)).sum(axis=0)
            env_steps, dropped = int(totals[0]), int(totals[1])
        lags = np.asarray(self.lags or [0])
        self.lags = []
        return env_steps, {"lag/mean": float(lags.mean()), "lag/max": int(lags.max()), "dropped_stale_columns": dropped}

    def waiting(self) -> str:
        return f"samples: holds {self.pending_columns}/{self.worker.share} columns"
