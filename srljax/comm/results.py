"""A distributed league's results stream: each actor tells the league manager how its member's games ended.

    receiver = ResultsReceiver("tcp://127.0.0.1:*", trial="exp/t0", members=3)        # the league manager (PULL)
    sender = ResultsSender(receiver.address, trial="exp/t0")                          # an actor (PUSH)
    sender.send(Results(member=1, opponents=("m0-v40", "latest"), scores=(1.0, 0.5)))
    results = receiver.recv(timeout_ms=0)       # Results | None; a malformed message is counted, never raised

A message is the project codec's (``srljax/comm/codec.py``: msgpack meta, no pickle): kind ``league_results``,
``meta`` the member, the opponents' names and the member's scores (1 win, 0.5 draw, 0 loss). ``checked_results``
refuses any other shape (``drop.results`` in the receiver's counters): a member outside the league, lists of
different lengths or over ``MAX_GAMES``, a name that is not ``latest`` or ``m<i>-v<version>``, a score outside [0, 1].
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import zmq

from srljax.comm.codec import DecodeError, Message
from srljax.comm.meta_stream import MetaReceiver, MetaSender
from srljax.layout import RESULTS
from srljax.selfplay.pool import LATEST

KIND_RESULTS = "league_results"
BAD_RESULTS = "results"  # drop reason
MAX_GAMES = 4096  # per message
MAX_RESULTS_BYTES = 256 * 1024
NAME = re.compile(r"m[0-9]+-v[0-9]+")


class Results(NamedTuple):
    member: int
    opponents: tuple[str, ...]
    scores: tuple[float, ...]


def checked_results(msg: Message, members: int) -> Results:
    """The ``Results`` in ``msg``, or ``DecodeError(BAD_RESULTS)`` naming what is wrong with it."""
    meta = msg.meta if isinstance(msg.meta, dict) else {}
    member, opponents, scores = meta.get("member"), meta.get("opponents"), meta.get("scores")
    if not isinstance(member, int) or isinstance(member, bool) or not 0 <= member < members:
        raise DecodeError(BAD_RESULTS, f"member={member!r} is not a member of a league of {members}")
    if not isinstance(opponents, list) or not isinstance(scores, list) or len(opponents) != len(scores):
        raise DecodeError(BAD_RESULTS, "opponents and scores must be lists of one length")
    if len(scores) > MAX_GAMES:
        raise DecodeError(BAD_RESULTS, f"{len(scores)} games in one message (at most {MAX_GAMES})")
    for name in opponents:
        if not isinstance(name, str) or not (name == LATEST or NAME.fullmatch(name)):
            raise DecodeError(BAD_RESULTS, f"opponent {name!r} is not {LATEST!r} or a snapshot name m<i>-v<version>")
    for s in scores:
        if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s) or not 0.0 <= s <= 1.0:
            raise DecodeError(BAD_RESULTS, f"score {s!r} is not a number in [0, 1]")
    return Results(member, tuple(opponents), tuple(float(s) for s in scores))


class ResultsSender(MetaSender):
    """PUSH, connected to the league manager. One thread only. ``counters()``: sent, send_timeouts."""

    stream = RESULTS

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 64) -> None:
        super().__init__(address, trial, ctx=ctx, hwm=hwm)

    def send(self, results: Results, timeout_ms: int = 0) -> bool:
        meta: dict[str, Any] = {"member": int(results.member), "opponents": list(results.opponents),
                                "scores": [float(s) for s in results.scores]}
        return self.send_meta(KIND_RESULTS, meta, 0, timeout_ms)


class ResultsReceiver(MetaReceiver):
    """PULL, bound (the league manager). One thread only. ``counters()``: received, drop.*."""

    stream, receives = RESULTS, RESULTS

    def __init__(self, address: str, trial: str, members: int, *, ctx: zmq.Context | None = None,
                 hwm: int = 1024) -> None:
        super().__init__(address, trial, kind=KIND_RESULTS, check=lambda msg: checked_results(msg, members),
                         max_bytes=MAX_RESULTS_BYTES, ctx=ctx, hwm=hwm)
        self.members = members
