"""Sample stream: actors (PUSH) -> buffer/trainer (PULL), with backpressure.

    receiver = SampleReceiver("tcp://127.0.0.1:*", trial="exp/t0", hwm=4)   # buffer / trainer
    sender = SampleSender(receiver.address, trial="exp/t0", hwm=4)           # actor
    if not sender.send(trajectory, timeout_ms=100, version=v, meta={"actor": 3}):
        backpressure += 1                       # the receiver is behind; nothing was queued
    msg = receiver.recv(timeout_ms=1000)        # Message(kind="sample", version, meta, tree) | None

Both ends hold at most ``hwm`` messages (plus what the kernel's socket buffers take), so a slow
receiver stalls the senders instead of growing memory. Arrays of 64 KiB or more are not copied:
ZMQ's I/O thread reads them in place after ``send`` has returned, possibly much later, so never
write into a sent array (send a copy if the actor refills its rollout buffer in place), or send it with
``send_tracked`` and wait for the tracker's ``done`` before writing (the buffer worker's reused joins). A sender
may ``connect`` to several receivers (round-robin).
"""

from __future__ import annotations

from typing import Any

import zmq

from srljax.comm.codec import Message
from srljax.comm.sockets import Endpoint, context, make_socket

KIND_SAMPLE = "sample"


class SampleSender(Endpoint):
    """PUSH, connected. One thread only. ``counters()``: sent, send_timeouts."""

    stream, receives = "samples", "subscriptions"  # a PUSH takes nothing in; its bound stays small

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 4) -> None:
        sock = make_socket(context(ctx), zmq.PUSH, sndhwm=hwm)
        # queue only towards connected receivers: before the first connection (or with none
        # left) a send waits/times out instead of piling messages onto a pending pipe
        sock.setsockopt(zmq.IMMEDIATE, 1)
        super().__init__(sock, trial, None)
        if address:
            self.connect(address)

    def send(self, tree: Any, timeout_ms: int | None = None, *, version: int = -1,
             meta: dict[str, Any] | None = None) -> bool:
        """Queue ``tree``; False if the receivers stayed full for ``timeout_ms`` (0: never wait, None: block)."""
        return self._encode_send(KIND_SAMPLE, tree, timeout_ms, version=version, meta=meta)

    def send_tracked(self, tree: Any, timeout_ms: int | None = None, *, version: int = -1,
                     meta: dict[str, Any] | None = None) -> zmq.MessageTracker | None:
        """``send``, returning None when it timed out, else the tracker whose ``done`` says zmq has let go of
        ``tree``'s arrays (until then they must not be written: ``JoinPool.hold``)."""
        ok = self._encode_send(KIND_SAMPLE, tree, timeout_ms, version=version, meta=meta, track=True)
        return self.tracker if ok else None


class SampleReceiver(Endpoint):
    """PULL, bound. One thread only. ``counters()``: received, drop.*."""

    stream, receives = "samples", "samples"

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 4,
                 max_bytes: int | None = None, max_message_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.PULL, rcvhwm=hwm)
        super().__init__(sock, trial, {KIND_SAMPLE}, max_bytes=max_bytes,
                         max_message_bytes=max_message_bytes)
        self.bind(address)

    def recv(self, timeout_ms: int | None = None) -> Message | None:
        """The next valid sample, or None after ``timeout_ms`` (None: block)."""
        got = self._recv_valid(timeout_ms)
        return None if got is None else got[1]
