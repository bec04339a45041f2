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

``shared_memory=True`` on both ends (``layout.shared_memory``, one host): the sender copies each message's arrays into
a slot of its ring in ``/dev/shm`` and sends only a descriptor; the receiver gives them back as read-only views of
the slot, which stays the receiver's until every array made from it is gone (``srljax/comm/shm.py``). The sender
then waits for a free slot as it waits for a full socket (``send`` returns False after ``timeout_ms``); a sent
array may be written again at once. A message larger than the ring's slots (``shm.fallback``), or one ``/dev/shm``
has no room for (``shm.no_space``), goes over the socket as before. A receiver must let go of what it received
(slots come back then): a sender needs more slots than the receiver holds of its messages at once (the trainer:
a batch's worth), so ``slots`` is set from the batch (``Worker.samples_options``).
"""

from __future__ import annotations

import time
from typing import Any

import zmq

from srljax.comm import shm
from srljax.comm.codec import DecodeError, Message, encode
from srljax.comm.sockets import Endpoint, context, make_socket

KIND_SAMPLE = "sample"
SHM_SLOTS = 8  # a sender's ring: slots touched only as far as needed (the lowest free one is taken first)


class SampleSender(Endpoint):
    """PUSH, connected. One thread only. ``counters()``: sent, send_timeouts."""

    stream, receives = "samples", "subscriptions"  # a PUSH takes nothing in; its bound stays small

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 4,
                 shared_memory: bool = False, slots: int = SHM_SLOTS, slot_bytes: int = 0) -> None:
        sock = make_socket(context(ctx), zmq.PUSH, sndhwm=hwm)
        # queue only towards connected receivers: before the first connection (or with none
        # left) a send waits/times out instead of piling messages onto a pending pipe
        sock.setsockopt(zmq.IMMEDIATE, 1)
        super().__init__(sock, trial, None)
        self.shared_memory, self.slots, self.slot_bytes = shared_memory, slots, slot_bytes  # 0: the first message's
        self.ring: shm.SlotRing | None = None  # made at the first send
        if address:
            self.connect(address)

    def send(self, tree: Any, timeout_ms: int | None = None, *, version: int = -1,
             meta: dict[str, Any] | None = None) -> bool:
        """Queue ``tree``; False if the receivers stayed full for ``timeout_ms`` (0: never wait, None: block)."""
        if self.shared_memory:
            return self._send_shared(tree, timeout_ms, version, meta, track=False)
        return self._encode_send(KIND_SAMPLE, tree, timeout_ms, version=version, meta=meta)

    def send_tracked(self, tree: Any, timeout_ms: int | None = None, *, version: int = -1,
                     meta: dict[str, Any] | None = None) -> zmq.MessageTracker | None:
        """``send``, returning None when it timed out, else the tracker whose ``done`` says zmq has let go of
        ``tree``'s arrays (until then they must not be written: ``JoinPool.hold``; at once through shared memory)."""
        if self.shared_memory:
            ok = self._send_shared(tree, timeout_ms, version, meta, track=True)
        else:
            ok = self._encode_send(KIND_SAMPLE, tree, timeout_ms, version=version, meta=meta, track=True)
        return self.tracker if ok else None

    def _send_shared(self, tree: Any, timeout_ms: int | None, version: int, meta: dict[str, Any] | None,
                     track: bool) -> bool:
        frames = encode(KIND_SAMPLE, self.trial, tree, version=version, meta=meta)
        head, buffers = frames[0], frames[1:]
        need = shm.slot_need([b.nbytes for b in buffers])
        if self.ring is None:
            try:
                self.ring = shm.SlotRing(self.trial, self.slots, max(need, self.slot_bytes, 1))
            except OSError:  # no ring here after all (descriptors, /dev/shm): over the socket from now on
                self.shared_memory = False
                self.counts["shm.unavailable"] += 1
                return self._send(frames, timeout_ms, track)
        if need > self.ring.slot_bytes:  # larger than the ring's slots: over the socket
            self.counts["shm.fallback"] += 1
            return self._send(frames, timeout_ms, track)
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        slot = self.ring.acquire(timeout_ms)
        if slot is None:
            self.counts["send_timeouts"] += 1
            return False
        left = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        if not self.sock.poll(left, zmq.POLLOUT):  # the descriptor could not go: the slot stays unwritten
            self.ring.cancel(slot)
            self.counts["send_timeouts"] += 1
            return False
        descriptor = self.ring.write(slot, buffers)
        if descriptor is None:  # no room in /dev/shm: over the socket
            return self._send(frames, 0, track)
        if not self._send([descriptor, head], 0):
            self.ring.unsent(slot)
            return False
        if track:
            self.tracker = zmq.MessageTracker()  # done: the arrays were copied into the slot
        return True

    def counters(self) -> dict[str, int]:
        return {**super().counters(), **(self.ring.counts if self.ring is not None else {})}

    def close(self) -> None:
        super().close()  # first: the descriptors still queued go out (LINGER_MS)
        if self.ring is not None:
            self.ring.close()


class SampleReceiver(Endpoint):
    """PULL, bound. One thread only. ``counters()``: received, drop.*."""

    stream, receives = "samples", "samples"

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 4,
                 max_bytes: int | None = None, max_message_bytes: int | None = None,
                 shared_memory: bool = False) -> None:
        sock = make_socket(context(ctx), zmq.PULL, rcvhwm=hwm)
        super().__init__(sock, trial, {KIND_SAMPLE}, max_bytes=max_bytes,
                         max_message_bytes=max_message_bytes)
        self.shm = shm.SlotReader(trial) if shared_memory else None
        self.bind(address)

    def recv(self, timeout_ms: int | None = None) -> Message | None:
        """The next valid sample, or None after ``timeout_ms`` (None: block)."""
        if self.shm is not None:
            self.shm.sweep()
        got = self._recv_valid(timeout_ms)
        return None if got is None else got[1]

    def _resolve(self, body: list[Any]) -> list[Any]:
        if len(body) != 2 or bytes(memoryview(body[0])[:len(shm.MAGIC)]) != shm.MAGIC:
            return body
        if self.shm is None:
            raise DecodeError(shm.SHM_OFF, "a shared-memory descriptor at a receiver without layout.shared_memory")
        try:
            return [body[1], *self.shm.resolve(body[0], self.max_message)]
        except DecodeError:
            raise
        except Exception as err:  # whatever else a descriptor provokes (a lock refused, ...) only drops it
            raise DecodeError(shm.SHM_BAD, repr(err)) from err

    def counters(self) -> dict[str, int]:
        return {**super().counters(), **(self.shm.counts if self.shm is not None else {})}

    def close(self) -> None:
        super().close()
        if self.shm is not None:
            self.shm.close()
