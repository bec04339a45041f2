"""The directives stream of a distributed PBT population: the population manager tells a member's trainer, at
each ready point, to copy another member (then train with a new learning rate) or to carry on.

    receiver = DirectiveReceiver("tcp://127.0.0.1:*", trial="exp/t0", population=4)   # member trainer (PULL)
    sender = DirectiveSender(receiver.address, trial="exp/t0")                         # the manager (PUSH)
    sender.send(Directive(copier=0, source=2, lr=1.2e-3, ready=3, source_version=30))   # copy member 2
    sender.send(Directive(copier=1, source=-1, lr=1e-3, ready=3, source_version=-1))    # carry on unchanged
    directive = receiver.recv(timeout_ms=0)      # Directive | None; a malformed one is counted, never raised

A directive is the project codec's message (``srljax/comm/codec.py``: msgpack meta, no pickle): kind ``pbt_copy``,
``version`` the ready point, ``meta`` the member, the member it copies (or -1), the learning rate and the source's
evaluated params version. ``checked_directive`` refuses any other shape (``drop.directive`` in the receiver's
counters): a member outside the population, a member copying itself, a learning rate that is not a positive finite
number, a ready point below 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import zmq

from srljax.comm.codec import DecodeError, Message
from srljax.comm.meta_stream import MetaReceiver, MetaSender
from srljax.layout import DIRECTIVES

KIND_COPY = "pbt_copy"
BAD_DIRECTIVE = "directive"  # drop reason
MAX_DIRECTIVE_BYTES = 16 * 1024


class Directive(NamedTuple):
    """At ready point ``ready``, member ``copier`` copies member ``source``'s newest complete checkpoint, then
    trains with ``lr``; ``source=-1``: it carries on unchanged."""

    copier: int
    source: int
    lr: float
    ready: int
    source_version: int


def checked_directive(msg: Message, population: int) -> Directive:
    """The ``Directive`` in ``msg``, or ``DecodeError(BAD_DIRECTIVE)`` naming what is wrong with it."""
    meta = msg.meta if isinstance(msg.meta, dict) else {}
    try:
        copier, source = meta["copier"], meta["source"]
        lr, version = meta["lr"], meta["source_version"]
    except KeyError as missing:
        raise DecodeError(BAD_DIRECTIVE, f"no {missing.args[0]!r} in the directive") from None
    for name, value in (("copier", copier), ("source", source), ("source_version", version)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise DecodeError(BAD_DIRECTIVE, f"{name}={value!r} is not an integer")
    if not 0 <= copier < population:
        raise DecodeError(BAD_DIRECTIVE, f"copier={copier} is not a member of a population of {population}")
    if not -1 <= source < population:
        raise DecodeError(BAD_DIRECTIVE, f"source={source} is not a member of a population of {population} (or -1)")
    if msg.version < 1:
        raise DecodeError(BAD_DIRECTIVE, f"ready point {msg.version} < 1")
    if copier == source:
        raise DecodeError(BAD_DIRECTIVE, f"member {copier} cannot copy itself")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise DecodeError(BAD_DIRECTIVE, f"lr={lr!r} is not a positive finite number")
    return Directive(copier, source, float(lr), int(msg.version), version)


class DirectiveSender(MetaSender):
    """PUSH, connected to one member's trainer. One thread only. ``counters()``: sent, send_timeouts."""

    stream = DIRECTIVES

    def send(self, directive: Directive, timeout_ms: int = 1000) -> bool:
        meta = {"copier": int(directive.copier), "source": int(directive.source), "lr": float(directive.lr),
                "source_version": int(directive.source_version)}
        return self.send_meta(KIND_COPY, meta, int(directive.ready), timeout_ms)


class DirectiveReceiver(MetaReceiver):
    """PULL, bound (a member's trainer). One thread only. ``counters()``: received, drop.*."""

    stream, receives = DIRECTIVES, DIRECTIVES

    def __init__(self, address: str, trial: str, population: int, *, ctx: zmq.Context | None = None,
                 hwm: int = 16) -> None:
        super().__init__(address, trial, kind=KIND_COPY, check=lambda msg: checked_directive(msg, population),
                         max_bytes=MAX_DIRECTIVE_BYTES, ctx=ctx, hwm=hwm)
        self.population = population
