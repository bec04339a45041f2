"""BufferWorker: sits between actors and trainers; for PPO it joins segments into fewer, larger messages.

    worker = BufferWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

Actors push ``[T+1, env.num_envs]`` segments here (PULL; several buffers take them round robin).
Every poll the buffer forwards everything it holds, joined into messages of at most one trainer
process's share of a batch (``batch_envs / trainer.num_hosts`` columns), to the trainers (PUSH,
round robin), and of at most ``message_columns`` columns, so that no frame passes 32 MB: the trainer's malloc
reuses freed memory for frames up to that size, where a larger one is a fresh mapping the kernel zeroes and faults
in (``comm.sockets.keep_freed_memory``). Atari's segments of 8 envs (29 MB of frames) are forwarded as they came,
with no copy: a held segment exactly one message wide is sent as it is, from the received frames. The joins are written into reused arrays (``JoinPool``): a sent one is written again
only once zmq's tracker says it has let go of it (the send is zero-copy), with the actors' completed-episode stats merged into ``meta``. It never holds
columns back waiting for a batch to fill, so whatever the numbers of actors, buffers and
trainer processes, every column reaches a trainer and batches assemble there. The env spec and
the extras to check come in the configure message; staleness is judged by the trainer, which
knows the current version. This is where replay for off-policy algorithms will live.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
import zmq

from srljax.comm import Message, NameResolver, SampleReceiver, SampleSender
from srljax.comm.security import KeyRing
from srljax.comm.sockets import KEEP_MMAP_THRESHOLD
from srljax.config import Experiment
from srljax.layout import BUFFER, SAMPLES, TRAINER
from srljax.learning.rollout import JoinPool
from srljax.system.shell.common import (
    bind_address,
    checked_trajectory,
    episode_meta,
    episodes_from_meta,
    wins_from_meta,
)
from srljax.system.shell.worker import Worker
from srljax.types import Trajectory

PUSH_WAIT_MS = 50
MAX_QUEUED = 4  # messages waiting for room at the trainers before the buffer stops taking more
DRAIN_MAX = 64


FRAME_MARGIN = 1 << 16  # below the threshold: what malloc and libzmq add to a frame's own bytes


def message_columns(num_steps: int, spec: Any, extras_spec: dict[str, Any], segment: int = 1) -> int:
    """The most columns of ``[num_steps + 1, columns]`` segments whose widest leaf stays below
    ``KEEP_MMAP_THRESHOLD`` (at least 1), a whole number of the actors' ``segment`` columns where one fits, so
    that segments are forwarded whole (without a join) where they can be."""
    leaves = [(spec.obs_shape, spec.obs_dtype), (spec.action_shape, spec.action_dtype), *(extras_spec or {}).values()]
    widest = max((num_steps + 1) * math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in leaves)
    fits = max(1, (KEEP_MMAP_THRESHOLD - FRAME_MARGIN) // max(widest, 1))
    return fits // segment * segment if fits >= segment >= 1 else fits


class BufferWorker(Worker):
    role = BUFFER
    serves = (SAMPLES,)

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too)
        self.chunk = 0
        self.receiver: SampleReceiver | None = None
        self.sender: SampleSender | None = None
        self.held: list[Trajectory] = []
        self.held_columns = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.wins: list[float] = []
        self.outgoing: deque[tuple[Trajectory, dict[str, Any]]] = deque()
        self.pool = JoinPool(keep=MAX_QUEUED + 2)

    def setup(self) -> None:
        cfg = self.cfg
        if self.spec is None:
            raise RuntimeError("the configure message carried no env spec")
        self.chunk = min(max(1, cfg.batch_envs // cfg.trainer.num_hosts),
                         message_columns(cfg.algo.num_steps, self.spec, self.extras_spec, cfg.env.num_envs))
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, **self.samples_options(sender=False))
        self.register(SAMPLES, self.receiver.address)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, **self.samples_options(True, self.chunk))
        self.connect_peers(self.sender, TRAINER, SAMPLES)
        self.held = []
        self.held_columns = 0
        self.returns = []
        self.lengths = []
        self.wins = []
        self.outgoing = deque()
        self.log(f"samples at {self.receiver.address}; forwarding up to {self.chunk} columns per message")

    def poll(self) -> None:
        if len(self.outgoing) >= MAX_QUEUED:
            self._push(PUSH_WAIT_MS)  # back-pressure: the trainers are behind
            return
        with self.stats.time("wait/samples"):
            msg = self.receiver.recv(timeout_ms=50)
            taken = 0
            while msg is not None:
                self._take(msg)
                taken += 1
                msg = self.receiver.recv(timeout_ms=0) if taken < DRAIN_MAX else None
        self.stats.gauge("queue/held_columns", self.held_columns)
        if self.held:
            meta = episode_meta(self.returns, self.lengths, self.wins)
            held, left = self.held, self.held_columns
            while held:
                head, held = self.pool.join(held, min(self.chunk, left))
                left -= head.reward.shape[1]
                self.outgoing.append((head, meta))
                meta = episode_meta([], [])
            self.held, self.held_columns, self.returns, self.lengths, self.wins = [], 0, [], [], []
        self._push(0)

    def _take(self, msg: Message) -> None:
        try:
            traj = checked_trajectory(msg.tree, self.spec, self.cfg.algo.num_steps, self.extras_spec)
        except ValueError:
            self.stats.add("samples_invalid")
            return
        returns, lengths = episodes_from_meta(msg.meta, max_count=traj.reward.size)
        self.returns += returns.tolist()
        self.lengths += lengths.tolist()
        self.wins += wins_from_meta(msg.meta, max_count=traj.reward.size).tolist()
        self.held.append(traj)
        self.held_columns += traj.reward.shape[1]
        self.stats.add("samples")
        self.stats.add("env_steps", self.cfg.algo.num_steps * traj.reward.shape[1])

    def _push(self, timeout_ms: int) -> None:
        while self.outgoing:
            batch, meta = self.outgoing[0]
            with self.stats.time("wait/push"):
                tracker = self.sender.send_tracked(batch, timeout_ms=timeout_ms, version=int(batch.policy_version.min()),
                                                   meta=meta)
            if tracker is None:
                return
            self.pool.hold(batch, tracker)  # rewritten by a later join only once zmq has sent it
            self.outgoing.popleft()
            self.stats.add("segments")

    def waiting(self) -> str:
        outgoing = list(self.outgoing)
        columns = sum(batch.reward.shape[1] for batch, _ in outgoing)
        return f"holds {columns} columns" + (" (the trainers are full)" if len(outgoing) >= MAX_QUEUED else "")

    def progress(self) -> int:
        return int(self.stats.counters["segments"])

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, endpoint in (("receiver", self.receiver), ("sender", self.sender)):
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        out.update({f"join/{k}": v for k, v in self.pool.counts.items()})
        return out

    def close(self) -> None:
        for thing in (self.receiver, self.sender):
            if thing is not None:
                thing.close()
