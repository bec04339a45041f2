"""A distributed PBT population's pieces shared by its workers: who acts for which member, each member's
experiment and folder, and the directives stream (population manager -> a member's trainer).

    member_of_actor(cfg, a)                      # actor a acts for member a % pbt.population
    sub = member_experiment(cfg, i)              # member i's trainer: seed + i, run folder RUN_DIR/members/<i>
    receiver = DirectiveReceiver("tcp://127.0.0.1:*", trial="exp/t0", population=4)   # member trainer (PULL)
    sender = DirectiveSender(receiver.address, trial="exp/t0")                         # the manager (PUSH)
    sender.send(Directive(copier=0, source=2, lr=1.2e-3, ready=3, source_version=30))   # copy member 2
    sender.send(Directive(copier=1, source=-1, lr=1e-3, ready=3, source_version=-1))    # carry on unchanged
    directive = receiver.recv(timeout_ms=0)      # Directive | None; a malformed one is counted, never raised

At every ready point each member's trainer waits for one directive from the manager: copy member j
(then train with the new learning rate), or carry on (``source=-1``). A directive travels as the project
codec's message (``srljax/comm/codec.py``: msgpack meta, no pickle): kind ``pbt_copy``, ``version`` the
ready point, ``meta`` the member, the member it copies (or -1), the learning rate and the source's
evaluated params version. ``checked_directive`` refuses any other shape (``drop.directive`` in the
receiver's counters): a member index outside the population, a member copying itself, a learning rate
that is not a positive finite number, a ready point below 1.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import zmq

from srljax.comm.codec import DecodeError, Message
from srljax.comm.sockets import Endpoint, context, make_socket
from srljax.config.pbt import MEMBERS_DIR, member_count, member_dir, member_lr
from srljax.layout import DIRECTIVES, PARAMS, TRAINER

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


def member_of_actor(cfg: Any, actor: int) -> int:
    """The member actor ``actor`` acts for: actors are dealt round robin, ``layout.num_actors / members`` each
    (a PBT population's or a league's, ``member_count``)."""
    return actor % member_count(cfg)


def member_follower(worker: Any, codec: Any, member: int) -> Any:
    """A ``ParamsFollower`` of member ``member``'s trainer (trainer ``member`` of the layout), following it
    to a new address when it restarts: an actor's (of its member) or the manager's (one per member)."""
    from srljax.system.training.params import ParamsFollower

    streams = worker.peers.get(TRAINER, {}).get(member, {})
    follower = ParamsFollower(worker.trial, [streams[PARAMS]] if PARAMS in streams else [], codec, worker.stats,
                              worker.ctx)
    worker.follow_peers(follower.sub, TRAINER, PARAMS, [member])
    return follower


def member_experiment(cfg: Any, member: int) -> Any:
    """The experiment as member ``member``'s trainer sees it: seed ``seed + member``, run folder
    ``RUN_DIR/members/<member>`` (``metrics.jsonl``, ``checkpoints/``), a checkpoint every ``pbt.ready_updates``
    updates (what another member copies; at least 3 kept, so a step being read is not pruned under the reader). A
    league's member checkpoints as ``checkpoint.every_updates`` says."""
    ready = cfg.pbt.ready_updates if cfg.pbt.enabled else cfg.checkpoint.every_updates
    checkpoint = dataclasses.replace(cfg.checkpoint, every_updates=ready, keep=max(3, cfg.checkpoint.keep))
    return dataclasses.replace(cfg, seed=cfg.seed + member, trial=f"{cfg.trial}/{MEMBERS_DIR}/{member}",
                               checkpoint=checkpoint)


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


class DirectiveSender(Endpoint):
    """PUSH, connected to one member's trainer. One thread only. ``counters()``: sent, send_timeouts."""

    stream, receives = DIRECTIVES, "subscriptions"

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None, hwm: int = 16) -> None:
        super().__init__(make_socket(context(ctx), zmq.PUSH, sndhwm=hwm), trial, None)
        if address:
            self.connect(address)

    def send(self, directive: Directive, timeout_ms: int = 1000) -> bool:
        meta = {"copier": int(directive.copier), "source": int(directive.source), "lr": float(directive.lr),
                "source_version": int(directive.source_version)}
        return self._encode_send(KIND_COPY, {}, timeout_ms, version=int(directive.ready), meta=meta)


class DirectiveReceiver(Endpoint):
    """PULL, bound (a member's trainer). One thread only. ``counters()``: received, drop.*."""

    stream, receives = DIRECTIVES, DIRECTIVES

    def __init__(self, address: str, trial: str, population: int, *, ctx: zmq.Context | None = None,
                 hwm: int = 16) -> None:
        sock = make_socket(context(ctx), zmq.PULL, rcvhwm=hwm)
        super().__init__(sock, trial, {KIND_COPY}, max_bytes=MAX_DIRECTIVE_BYTES)
        self.population = population
        self.bind(address)

    def recv(self, timeout_ms: int | None = 0) -> Directive | None:
        """The next well-formed directive, or None after ``timeout_ms``; malformed ones are counted and skipped."""
        while (got := self._recv_valid(timeout_ms)) is not None:
            try:
                return checked_directive(got[1], self.population)
            except DecodeError as err:
                self.drops.add(err)
                self.counts["received"] -= 1
            timeout_ms = 0
        return None


__all__ = ["Directive", "DirectiveReceiver", "DirectiveSender", "checked_directive", "member_dir",
           "member_experiment", "member_follower", "member_lr", "member_of_actor"]
