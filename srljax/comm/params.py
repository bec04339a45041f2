"""Params broadcast: trainer (PUB) -> policy workers / actors (SUB); only the newest matters.

    pub = ParamsPublisher("tcp://127.0.0.1:*", trial="exp/t0")            # trainer
    pub.publish(version=12, tree=params)          # never blocks
    sub = ParamsSubscriber(pub.address, trial="exp/t0")                   # policy worker
    got = sub.poll_newest(timeout_ms=0)           # Params(version, tree) | None

PUB drops messages for a subscriber that is behind, silently, and a subscriber that connects
late only hears later publishes: so publish the current params again from time to time, treat
a repeated version as a no-op, and never carry control messages here (use ``control``).
``ZMQ_CONFLATE`` cannot handle multipart messages, so the subscriber keeps a small RCVHWM and
drains its queue, keeping the newest version.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import zmq

from srljax.comm.sockets import Endpoint, context, make_socket

KIND_PARAMS = "params"
VERSION = "version"  # drop reason: a params version outside 0..max_version
REFILL_MS = 2  # grace for the I/O thread to move more queued bytes into a drained full pipe
REFILL_ROUNDS = 32


class Params(NamedTuple):
    version: int
    tree: Any


class ParamsPublisher(Endpoint):
    """PUB, bound. One thread only. ``counters()``: sent."""

    stream, receives = "params", "subscriptions"

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 2) -> None:
        sock = make_socket(context(ctx), zmq.PUB, sndhwm=hwm)
        super().__init__(sock, trial, None)
        self.bind(address)

    def publish(self, version: int, tree: Any, meta: dict[str, Any] | None = None) -> None:
        """Broadcast ``tree`` as ``version``. Zero-copy: do not mutate its arrays afterwards."""
        self._encode_send(KIND_PARAMS, tree, None, version=version, meta=meta)  # PUB never blocks


class ParamsSubscriber(Endpoint):
    """SUB, connected. One thread only. ``counters()``: received, superseded, drop.*.

    ``max_bytes``: the largest frame accepted (the biggest params leaf, with headroom; ``max_message_bytes``:
    the whole message, all leaves); larger ones
    cost the publisher its connection before they are allocated.
    """

    stream, receives = "params", "params"

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 2,
                 max_bytes: int | None = None, max_message_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.SUB, rcvhwm=hwm)
        sock.setsockopt(zmq.SUBSCRIBE, b"")  # the trial is checked on decode, not by topic
        super().__init__(sock, trial, {KIND_PARAMS}, max_bytes=max_bytes,
                         max_message_bytes=max_message_bytes)
        self.hwm = sock.getsockopt(zmq.RCVHWM)  # the byte bound may have lowered it
        if address:
            self.connect(address)

    def poll_newest(self, timeout_ms: int | None = 0, max_version: int | None = None) -> Params | None:
        """Wait up to ``timeout_ms`` for params, drain the queue, return the highest version seen.

        Versions below 0 or above ``max_version`` (the trial's last update) are dropped and counted
        (``drop.version``): one such message must not outrank every real version after it.
        """
        got = batch = self._drain_valid(timeout_ms)
        if not got:
            return None
        # A full pipe means more may wait in the kernel's socket buffers, behind it: libzmq only
        # reads them once we make room, so give it a moment and drain again.
        for _ in range(REFILL_ROUNDS):
            if len(batch) < self.hwm:
                break
            batch = self._drain_valid(REFILL_MS)
            got = got + batch
        if max_version is not None:
            fit = [(env, msg) for env, msg in got if 0 <= msg.version <= max_version]
            self.drops.add(VERSION, len(got) - len(fit))
            self.counts["received"] -= len(got) - len(fit)
            got = fit
            if not got:
                return None
        newest = max((msg for _, msg in got), key=lambda m: m.version)  # ties: max keeps the first
        self.counts["superseded"] += len(got) - 1
        return Params(newest.version, newest.tree)
