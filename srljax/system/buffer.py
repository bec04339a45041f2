"""BufferWorker: sits between actors and the trainer; for PPO it joins segments into batches.

    worker = BufferWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

Actors push ``[T+1, env.num_envs]`` segments here (PULL); once a buffer holds its share of a
training batch (``ceil(batch_envs / num_buffer_workers)`` columns) it joins them and pushes one
segment on to the trainer, with the actors' completed-episode stats merged into its ``meta``.
Staleness is still judged by the trainer, which knows the current version. This is where
replay for off-policy algorithms will live.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from srljax.comm import Message, SampleReceiver, SampleSender
from srljax.rollout import concat_segments, split_segments
from srljax.system.common import bind_address, checked_trajectory, env_spec, episode_meta, episodes_from_meta
from srljax.system.worker import Worker
from srljax.types import Trajectory

PUSH_WAIT_MS = 50


class BufferWorker(Worker):
    role = "buffer"

    def setup(self) -> None:
        import algos

        cfg = self.cfg
        self.spec = env_spec(cfg)
        self.extras_spec = algos.make(cfg, self.spec).extras_spec
        self.chunk = math.ceil(cfg.batch_envs / max(1, cfg.layout.num_buffer_workers))
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx)
        self.register("samples", self.receiver.address)
        self.sender = SampleSender(self.lookup("trainer", 0, "samples"), self.trial, ctx=self.ctx)
        self.held: list[Trajectory] = []
        self.held_columns = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.outgoing: deque[tuple[Trajectory, dict[str, Any]]] = deque()
        self.log(f"samples at {self.receiver.address}; forwarding {self.chunk} columns at a time")

    def poll(self) -> None:
        if self.outgoing and not self._push():
            return
        with self.stats.time("wait/samples"):
            msg = self.receiver.recv(timeout_ms=50)
        if msg is not None:
            self._take(msg)
        self.stats.gauge("queue/held_columns", self.held_columns)
        while self.held_columns >= self.chunk:
            batch, rest = split_segments(concat_segments(self.held), self.chunk)
            self.held = [rest] if rest.reward.shape[1] else []
            self.held_columns -= self.chunk
            self.outgoing.append((batch, episode_meta(self.returns, self.lengths)))
            self.returns, self.lengths = [], []
        self._push()

    def _take(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.extras_spec)
        except ValueError:
            self.stats.add("samples_invalid")
            return
        returns, lengths = episodes_from_meta(msg.meta)
        self.returns += returns.tolist()
        self.lengths += lengths.tolist()
        self.held.append(traj)
        self.held_columns += traj.reward.shape[1]
        self.stats.add("samples")
        self.stats.add("env_steps", self.cfg.algo.num_steps * traj.reward.shape[1])

    def _push(self) -> bool:
        while self.outgoing:
            batch, meta = self.outgoing[0]
            with self.stats.time("wait/push"):
                ok = self.sender.send(batch, timeout_ms=PUSH_WAIT_MS, version=int(batch.policy_version.min()), meta=meta)
            if not ok:
                return False
            self.outgoing.popleft()
            self.stats.add("segments")
        return True

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("receiver", "sender"):
            endpoint = getattr(self, name, None)
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        for name in ("receiver", "sender"):
            thing = getattr(self, name, None)
            if thing is not None:
                thing.close()
