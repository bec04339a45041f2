"""One PUSH -> PULL endpoint pair for the small streams whose messages are only meta (no arrays): a manager's
directives to a member's trainer (``directives.py``), an actor's game results to the league manager
(``results.py``). Each stream names its kind, its frame bound and a check that turns a message into its record.

    receiver = MetaReceiver("tcp://127.0.0.1:*", trial, kind="pbt_copy", check=lambda msg: ..., max_bytes=16384)
    sender = MetaSender(receiver.address, trial)
    sender.send_meta("pbt_copy", {"copier": 1, ...}, version=3)
    record = receiver.recv(timeout_ms=0)        # check(msg), or None; a malformed message is counted, never raised
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from srljax.comm.codec import DecodeError, Message
from srljax.comm.sockets import Endpoint, context, make_socket


class MetaSender(Endpoint):
    """PUSH, connected to one receiver. One thread only. ``counters()``: sent, send_timeouts."""

    receives = "subscriptions"  # it receives nothing; the smallest bound

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 16) -> None:
        super().__init__(make_socket(context(ctx), zmq.PUSH, sndhwm=hwm), trial, None)
        if address:
            self.connect(address)

    def send_meta(self, kind: str, meta: dict[str, Any], version: int = 0, timeout_ms: int = 1000) -> bool:
        return self._encode_send(kind, {}, timeout_ms, version=version, meta=meta)


class MetaReceiver(Endpoint):
    """PULL, bound. One thread only. ``counters()``: received, drop.* (a message ``check`` refuses with
    ``DecodeError`` is counted under its reason and skipped)."""

    def __init__(self, address: str, trial: str, *, kind: str, check: Callable[[Message], Any], max_bytes: int,
                 ctx: zmq.Context | None = None, hwm: int = 16) -> None:
        super().__init__(make_socket(context(ctx), zmq.PULL, rcvhwm=hwm), trial, {kind}, max_bytes=max_bytes)
        self.check = check
        self.bind(address)

    def recv(self, timeout_ms: int | None = 0) -> Any:
        """The next well-formed record, or None after ``timeout_ms``; malformed ones are counted and skipped."""
        while (got := self._recv_valid(timeout_ms)) is not None:
            try:
                return self.check(got[1])
            except DecodeError as err:
                self.drops.add(err)
                self.counts["received"] -= 1
            timeout_ms = 0
        return None
