"""Remote inference: actors (DEALER) send observation batches, a policy worker (ROUTER) replies.

    server = InferenceServer("tcp://127.0.0.1:*", trial="exp/t0")         # policy worker
    names.add("exp/t0/policy/0", server.address)
    client = InferenceClient(names.wait("exp/t0/policy/0", 60), trial="exp/t0")   # actor

    client.send(request_id=7, tree={"obs": obs})                # several may be in flight
    for req in server.poll_requests(timeout_ms=5):              # drains everything queued
        server.reply(req, {"action": act}, version=params_version)
    rep = client.recv(timeout_ms=1000)                          # Reply(request_id=7, tree, version)

Request ids are the client's own (e.g. its env-ring slot); replies can come back in any order,
so match them by id. Batching across requests (flush on size or deadline) belongs to the policy
worker, on top of ``poll_requests``. A client may ``connect`` to several servers: requests are
then dealt round-robin.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import zmq

from srljax.comm.codec import MALFORMED, DecodeError, Message
from srljax.comm.sockets import Endpoint, context, make_socket

KIND_REQUEST = "infer_req"
KIND_REPLY = "infer_rep"


class Request(NamedTuple):
    client_id: bytes  # the ROUTER's id for the sender; opaque
    request_id: int
    tree: Any


class Reply(NamedTuple):
    request_id: int
    tree: Any
    version: int  # params version the server acted with (-1 if it did not say)


def _request_id(msg: Message) -> int:
    rid = msg.meta.get("rid")
    if type(rid) is not int:
        raise DecodeError(MALFORMED, "missing integer request id")
    return rid


class InferenceServer(Endpoint):
    """ROUTER, bound. One thread only. ``counters()``: received, sent, reply_dropped, drop.*.

    Queued requests are bounded per actor in messages (``rcvhwm``) and bytes: with ``max_bytes``
    (or the context's limit for ``requests``) the queue holds at most ``queue_bytes // max_bytes``.
    """

    stream, receives = "inference", "requests"
    queue_in_bytes = True
    single_frame = True  # requests and replies are small; actors and policy workers come and go

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None,
                 sndhwm: int = 1000, rcvhwm: int = 1000, max_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.ROUTER, sndhwm=sndhwm, rcvhwm=rcvhwm)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # an unroutable reply raises instead of vanishing
        super().__init__(sock, trial, {KIND_REQUEST}, max_bytes=max_bytes)
        self.bind(address)

    def _validate(self, msg: Message) -> None:
        _request_id(msg)

    def poll_requests(self, timeout_ms: int | None = 0, max_requests: int | None = None) -> list[Request]:
        """Wait up to ``timeout_ms`` for a request, then return it and all others already queued."""
        got = self._drain_valid(timeout_ms, envelope=1, limit=max_requests)
        return [Request(env[0], _request_id(msg), msg.tree) for env, msg in got]

    def reply(self, request: Request, tree: Any, *, version: int = -1) -> bool:
        """Send ``tree`` back to the request's client; False (and counted) if it is gone or not reading."""
        try:
            ok = self._encode_send(KIND_REPLY, tree, 0, version=version, meta={"rid": request.request_id},
                                   envelope=[request.client_id])
        except zmq.ZMQError as err:
            if err.errno != zmq.EHOSTUNREACH:
                raise
            ok = False
        if not ok:
            self.counts["reply_dropped"] += 1
        return ok


class InferenceClient(Endpoint):
    """DEALER, connected. One thread only. ``counters()``: sent, send_timeouts, received, drop.*."""

    stream, receives = "inference", "replies"
    queue_in_bytes = True
    single_frame = True

    def __init__(self, address: str | None, trial: str, *, ctx: zmq.Context | None = None,
                 sndhwm: int = 1000, rcvhwm: int = 1000, max_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.DEALER, sndhwm=sndhwm, rcvhwm=rcvhwm)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue only to live servers, so a dead one gets nothing
        super().__init__(sock, trial, {KIND_REPLY}, max_bytes=max_bytes)
        if address:
            self.connect(address)

    def _validate(self, msg: Message) -> None:
        _request_id(msg)

    def send(self, request_id: int, tree: Any, timeout_ms: int | None = None) -> bool:
        """Queue one request; False if no server took it within ``timeout_ms`` (None: block)."""
        return self._encode_send(KIND_REQUEST, tree, timeout_ms, meta={"rid": int(request_id)})

    def recv(self, timeout_ms: int | None = None) -> Reply | None:
        """The next reply, or None after ``timeout_ms`` (None: block)."""
        got = self._recv_valid(timeout_ms)
        if got is None:
            return None
        msg = got[1]
        return Reply(_request_id(msg), msg.tree, msg.version)
