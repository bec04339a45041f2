"""Priority stream: trainer (PUSH, one per replay shard) -> replay buffer worker (PULL): new priorities for a batch.

    receiver = PriorityReceiver("tcp://127.0.0.1:*", trial="exp/t0")        # a replay shard
    sender = PrioritySender(receiver.address, trial="exp/t0")               # the trainer, one per shard
    sender.send(PriorityUpdate(slot, written, priority), shard_incarnation="3f9a", version=v)
    update = receiver.recv(timeout_ms=0)      # (PriorityUpdate, meta) | None

A sampled batch carries its keys (``slot``, ``written``: ``srljax.replay.buffer.SampleKeys``) and the
shard's ``incarnation``; the trainer sends them back with the update's ``|TD error|`` to the
shard that drew the batch (one connected PUSH per shard, so routing is by socket, not by a
broadcast). The shard applies only updates for its own incarnation (a restarted shard's slots
hold other rows) and ``Replay.update_priorities`` skips rows overwritten since they were drawn.
Lossy by design: a full shard (``hwm``) makes ``send`` return False at once and the update is
dropped and counted, never queued without bound; the rows keep their old priorities.
Two small messages share the stream: ``grant`` (``PrioritySender.grant``), the trainer's cumulative
batch credit for one shard incarnation (a shard samples only what was asked for, so at most the
trainer's prefetch is in flight; resent every second, as PUSH to a restarting peer may drop), and
``save``: the trainer checkpointed, and a shard with ``checkpoint.replay`` writes its snapshot.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import zmq

from srljax.comm.codec import DecodeError, Message
from srljax.comm.sockets import Endpoint, context, make_socket

KIND_PRIORITIES = "priorities"
KIND_SAVE = "save"
KIND_GRANT = "grant"
SHAPE = "shape"  # drop reason: the three arrays are not [N] of the same N


class PriorityUpdate(NamedTuple):
    """New priorities [N] for the rows a shard sampled: ``slot`` [N] int64, ``written`` [N] int64 (the keys
    it sent with the batch) and ``priority`` [N] float32 (``|TD error|``)."""

    slot: np.ndarray
    written: np.ndarray
    priority: np.ndarray


class PrioritySender(Endpoint):
    """PUSH, connected to one replay shard. One thread only. ``counters()``: sent, send_timeouts."""

    stream, receives = "priorities", "subscriptions"

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 8) -> None:
        sock = make_socket(context(ctx), zmq.PUSH, sndhwm=hwm)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # nothing queued for a shard that is not connected (yet, or any more)
        super().__init__(sock, trial, None)
        if address:
            self.connect(address)

    def send(self, update: PriorityUpdate, *, incarnation: str, version: int) -> bool:
        """Queue ``update`` for the shard ``incarnation``; False (dropped) if the shard is full or absent."""
        tree = {"slot": np.asarray(update.slot, np.int64), "written": np.asarray(update.written, np.int64),
                "priority": np.asarray(update.priority, np.float32)}
        return self._encode_send(KIND_PRIORITIES, tree, 0, version=version, meta={"incarnation": incarnation})

    def grant(self, total: int, *, incarnation: str) -> bool:
        """Credit: shard ``incarnation`` may have sent ``total`` batches in all."""
        return self._encode_send(KIND_GRANT, {}, 0, version=total, meta={"incarnation": incarnation})

    def save(self, version: int) -> bool:
        """Ask the shard to snapshot its replay (the trainer wrote checkpoint ``version``)."""
        return self._encode_send(KIND_SAVE, {}, 0, version=version)


class PriorityReceiver(Endpoint):
    """PULL, bound (a replay shard). One thread only. ``counters()``: received, drop.*."""

    stream, receives = "priorities", "priorities"

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 16,
                 max_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.PULL, rcvhwm=hwm)
        super().__init__(sock, trial, {KIND_PRIORITIES, KIND_SAVE, KIND_GRANT}, max_bytes=max_bytes)
        self.bind(address)

    def recv(self, timeout_ms: int | None = 0) -> tuple[str, Any, Message] | None:
        """``("priorities", PriorityUpdate, msg)``, ``("grant", total, msg)`` or ``("save", version, msg)``, or
        None after ``timeout_ms``."""
        while (got := self._recv_valid(timeout_ms)) is not None:
            msg = got[1]
            if msg.kind in (KIND_SAVE, KIND_GRANT):
                return msg.kind, msg.version, msg
            try:
                return KIND_PRIORITIES, checked_update(msg.tree), msg
            except DecodeError as err:
                self.drops.add(err)
                self.counts["received"] -= 1
            timeout_ms = 0
        return None


def checked_update(tree: Any) -> PriorityUpdate:
    """A ``PriorityUpdate`` from a decoded tree, or ``DecodeError(SHAPE)`` when it is not three [N] arrays."""
    if not isinstance(tree, dict) or set(tree) != {"slot", "written", "priority"}:
        raise DecodeError(SHAPE, "expected {slot, written, priority}")
    slot, written, priority = (np.asarray(tree[k]) for k in ("slot", "written", "priority"))
    if slot.ndim != 1 or slot.shape != written.shape or slot.shape != priority.shape or \
            slot.dtype.kind != "i" or written.dtype.kind != "i" or priority.dtype.kind != "f":
        raise DecodeError(SHAPE, f"slot {slot.shape}, written {written.shape}, priority {priority.shape}")
    return PriorityUpdate(slot.astype(np.int64), written.astype(np.int64), priority.astype(np.float32))
