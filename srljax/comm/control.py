"""Control channel: the controller (ROUTER) and each worker (DEALER) exchange small commands.

    ctl = ControlServer("tcp://127.0.0.1:*", trial="exp/t0")                   # controller
    w = ControlClient(ctl.address, trial="exp/t0", worker="exp/t0/actor/3")    # worker
    w.send("register", {"pid": 1234, "address": sample_addr})
    for m in ctl.poll(timeout_ms=100):            # ControlMessage(kind, worker, payload)
        ctl.send(m.worker, "configure", {"seed": 3})
    m = w.recv(timeout_ms=1000)                   # ControlMessage("configure", "exp/t0/actor/3", {...})

Payloads are msgpack-only (plain dicts, lists, numbers, strings; no arrays), carried in the
codec header, so trial and schema checks apply and foreign frames are dropped. The server
learns each worker's route from its messages (a restarted worker just registers again; ``poll``'s
``accept`` lets the controller ignore the dead one's late messages, so they do not take the route
back), and ``send`` to a worker it never heard from returns False. Unlike params, nothing here is dropped
silently: HWMs are large and a full queue makes ``send`` return False.

Built for thousands of workers connecting at once (``bench/control_plane.py``): the server's
listen backlog is sized for them (``backlog``: connections beyond it wait out TCP's SYN
retransmits, 1 s, 3 s, 7 s, ...), both ends allow ``HANDSHAKE_S`` for a CURVE handshake (libzmq's
30 s default, on a crowded controller, ends handshakes it has half done and the clients start
over, which costs the crypto again), and a client queues messages only once its connection is
up (``ZMQ_IMMEDIATE``): a worker that waits its turn to connect does not arrive with a backlog
of stale heartbeats; ``send`` says False meanwhile, so a worker resends what must arrive.

Per-node aggregation (``srljax/system/shell/relay.py``): a node's relay holds the one connection to
the controller for all of that node's workers. Upward it sends ``relay`` messages whose payload
``{"messages": [[worker, kind, payload], ...], "alive": [worker, incarnation, ...]}`` holds the workers'
messages (each packed once at the relay, ``pack_entry`` and ``relay_frame``; decoded in one ``unpackb``
with the header) and the names of workers whose heartbeat said nothing new (the relay's rule: the
same state and ``waiting`` as the last full beat, a young loop, that beat under 30 s old, not a trainer): those
are only signs of life, queued in ``ControlServer.alive`` for the controller, which takes them for
the current incarnation in one tight loop; ``ControlServer.poll`` unpacks them into the workers' own messages, each routed
back through the relay, so the controller is unchanged above ``poll``. A ``relay`` message must
come from the ``relay`` key (with CURVE on; its worker key's role is ``relay`` either way); its
entries were checked against their senders' keys by the relay. Downward a command for one worker
is queued per relay and leaves, with the others queued for that relay, as one ``relay`` message
``{"messages": [[worker, kind, payload], ...]}`` at the next ``poll`` (or ``flush``); ``send_many``
sends a command for many workers behind one relay as one ``relay`` message ``{"workers", "kind",
"payload"}`` that the relay fans out.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from typing import Any, NamedTuple

import msgpack
import zmq

from srljax.comm.codec import MALFORMED, SCHEMA_VERSION, DecodeError, Message, _check_str_keys
from srljax.comm.sockets import LATE_DRAIN, SENDER, Endpoint, context, make_socket, sender_identity

RELAY = "relay"  # the kind of a relay's batches and fan-outs, and the role (key identity) of a relay
WORKER_KINDS = frozenset({"register", "heartbeat", "status", "done", "names"})  # what a worker sends
TO_CONTROLLER = WORKER_KINDS | {RELAY}
CONTROL_ADDRESS_ENV = "SRLJAX_CONTROL_ADDRESS"  # set: a worker connects here (its node's relay), not to the controller
FAN_OUT = 1000  # workers named in one ``relay`` fan-out at most
OUTBOX_BYTES = 128 << 10  # commands queued for one relay before they leave without waiting for ``poll``
MAX_ALIVE = 10_000  # relay batches' alive lists kept until taken (the oldest go first)
HANDSHAKE_S = 120.0  # ZMQ_HANDSHAKE_IVL on both ends of the control channel
DEFAULT_BACKLOG = 1024  # ZMQ_BACKLOG of the server when not told how many will connect (libzmq: 100)
_NO_TREE = ["v", None]  # the treedef of a message without a tree (every control message)
_NOBLOCK = int(zmq.NOBLOCK)
TO_WORKER = frozenset({"configure", "start", "pause", "stop", "status", "peers", "restarts", "names_reply"})
TO_RELAY = TO_WORKER | {RELAY}  # what a relay takes from the controller: workers' commands and fan-outs


class ControlMessage(NamedTuple):
    kind: str  # the command: register, heartbeat, configure, start, pause, stop, status, done, peers, restarts,
    # names and names_reply (names served by the controller, srljax/comm/served_names.py)
    worker: str  # the worker's name key, e.g. "exp/t0/actor/3"
    payload: dict[str, Any]


def _unpack(msg: Message) -> ControlMessage:
    worker, payload = msg.meta.get("worker"), msg.meta.get("payload")
    if not isinstance(worker, str) or not isinstance(payload, dict) or msg.tree is not None:
        raise DecodeError(MALFORMED, "control message needs meta.worker, meta.payload and no tree")
    return ControlMessage(msg.kind, worker, payload)


def pack_entry(worker: str, kind: str, payload: dict[str, Any]) -> bytes:
    """One worker message as a relay batch carries it, packed once (``relay_frame`` joins them)."""
    return msgpack.packb([worker, kind, payload], use_bin_type=True)


def relay_frame(trial: str, relay: str, entries: list[bytes], alive: list[str] | None = None) -> bytes:
    """The body of a relay's batch from ``pack_entry``'s bytes, joined without packing them again: the
    bytes ``encode(RELAY, trial, None, meta={"worker": relay, "payload": {"messages": [...]}})`` makes,
    with ``meta`` last (``tests/test_relay.py`` decodes it). The entries' maps came from msgpack or
    from the caller's own dicts of str keys, so the codec's key check over every entry is not repeated."""
    packer = msgpack.Packer(use_bin_type=True)
    head = {"kind": RELAY, "trial": trial, "schema": SCHEMA_VERSION, "version": -1, "treedef": _NO_TREE, "arrays": []}
    parts = [packer.pack_map_header(len(head) + 1), *(packer.pack(k) + packer.pack(v) for k, v in head.items()),
             packer.pack("meta"), packer.pack_map_header(2), packer.pack("worker"), packer.pack(relay),
             packer.pack("payload"), packer.pack_map_header(2), packer.pack("alive"), packer.pack(alive or []),
             packer.pack("messages"), packer.pack_array_header(len(entries)), *entries]
    return b"".join(parts)


def worker_role(worker: str) -> str:
    """``worker_role("exp/t0/actor/3") == "actor"``: the role a worker key names."""
    parts = worker.rsplit("/", 2)
    return parts[-2] if len(parts) == 3 else ""


class ControlServer(Endpoint):
    """ROUTER, bound. One thread only. ``last_seen[worker]``: ``time.monotonic()`` of its last message.

    With CURVE on (a ``WireContext`` with keys) a message naming worker ``exp/t0/actor/3`` must come
    from the ``actor`` key, so no worker can speak for another role (``done`` is the trainer's).
    """

    stream, receives = "control", "control"
    queue_in_bytes = True

    def __init__(self, address: str, trial: str, *, ctx: zmq.Context | None = None,
                 kinds: Collection[str] = TO_CONTROLLER, max_bytes: int | None = None,
                 backlog: int = DEFAULT_BACKLOG) -> None:
        sock = make_socket(context(ctx), zmq.ROUTER, sndhwm=10_000, rcvhwm=10_000)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # unroutable sends raise, so send() can say False
        sock.setsockopt(zmq.BACKLOG, backlog)  # pending connections (the kernel caps it at net.core.somaxconn)
        sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_S * 1000))
        super().__init__(sock, trial, kinds, max_bytes=max_bytes)
        self.bind(address)
        self.routes: dict[str, bytes] = {}  # worker key -> ROUTER peer id (its relay's, behind a relay)
        self.last_seen: dict[str, float] = {}
        self.relays: dict[bytes, str] = {}  # ROUTER peer id -> relay key, for the relays that spoke
        self._unbatched: deque[tuple[bytes, ControlMessage]] = deque()  # a relay batch's messages not yet taken
        # relays' signs of life ``(route, [worker, incarnation, ...])``, for the controller (``take_alive``)
        self.alive: deque[tuple[bytes, list[Any]]] = deque(maxlen=MAX_ALIVE)
        self._outbox: dict[bytes, tuple[list[bytes], int]] = {}  # relay route -> commands packed for it, bytes

    def _validate(self, msg: Message) -> None:
        _unpack(msg)

    def _check_sender(self, frame: Any, msg: Message) -> None:
        self._check_role(frame, msg.meta["worker"])  # _validate checked it is a str

    def _check_role(self, frame: Any, worker: str) -> None:
        if self.rules is None or self.rules.keys is None:
            return
        sender, role = sender_identity(frame), worker_role(worker)
        if sender != role:
            raise DecodeError(SENDER, f"{role!r} message from the {sender!r} key")

    def _take(self) -> tuple[bytes, ControlMessage] | None:
        """One queued message: ``(route, message)``, or None when it was dropped (counted); ``zmq.Again``
        when none is queued. The controller's hottest path (N heartbeats a second): a control message
        (a routing id and one body frame, no arrays) is checked here in one pass over its header, as
        strictly as ``decode`` + ``_unpack`` + the sender check would; anything else (bad or unusual)
        goes through those, so it is refused for the same reason and counted the same way."""
        # A ROUTER always delivers the routing id, then the body. The id as bytes and the body as a
        # Frame (it carries the sender's CURVE User-Id; a Frame per part costs a small message about
        # twice what bytes do); the Frame's ``more`` saves a getsockopt(RCVMORE) per part.
        route = self.sock.recv(_NOBLOCK)
        body = self.sock.recv(_NOBLOCK, copy=False)
        if body.more:  # more than one body frame: no control message has that
            parts = [route, body]
            while parts[-1].more:
                parts.append(self.sock.recv(_NOBLOCK, copy=False))
            if self.max_message is not None and sum(map(len, parts)) > self.max_message:
                self.drop_too_big(parts)
                return None
            return self._slow(parts)
        try:
            header = msgpack.unpackb(body, raw=False)
        except Exception:  # the codec names the reason
            return self._slow([route, body])
        if type(header) is dict and header.get("treedef") == _NO_TREE and header.get("arrays") == [] and \
                type(schema := header.get("schema")) is int and schema == SCHEMA_VERSION and \
                type(kind := header.get("kind")) is str and header.get("trial") == self.trial and \
                (self.kinds is None or kind in self.kinds) and type(header.get("version")) is int and \
                type(meta := header.get("meta")) is dict and type(worker := meta.get("worker")) is str and \
                type(payload := meta.get("payload")) is dict:
            try:
                self._check_role(body, worker)
            except DecodeError as err:
                self.drops.add(err)
                return None
            self.counts["received"] += 1
            if kind == RELAY:
                return self._unbatch(route, worker, payload)
            return route, ControlMessage(kind, worker, payload)
        return self._slow([route, body])

    def _unbatch(self, route: bytes, relay: str, payload: dict[str, Any]) -> tuple[bytes, ControlMessage] | None:
        """A relay's batch: its workers' messages queued for ``poll`` (the first returned), its alive list
        for ``take_alive``; a bad entry is dropped and counted, the others kept."""
        entries = payload.get("messages")
        if worker_role(relay) != RELAY or type(entries) is not list:
            self.drops.add(DecodeError(MALFORMED, f"a relay message from {relay!r} needs a relay key and a list"))
            return None
        self.relays[route] = relay
        self.counts["unbatched"] += len(entries)
        alive = payload.get("alive", [])
        if type(alive) is list and len(alive) % 2 == 0:
            if alive:
                self.alive.append((route, alive))
                self.counts["alive"] += len(alive) // 2
        else:
            self.drops.add(DecodeError(MALFORMED, f"relay {relay!r}: alive is not [worker, incarnation, ...]"))
        queued = self._unbatched
        kinds = WORKER_KINDS if self.kinds is None else WORKER_KINDS & self.kinds
        for entry in entries:
            if type(entry) is list and len(entry) == 3:
                worker, kind, body = entry
                if type(worker) is str and type(kind) is str and kind in kinds and type(body) is dict:
                    queued.append((route, ControlMessage(kind, worker, body)))
                    continue
            self.drops.add(DecodeError(MALFORMED, f"relay {relay!r}: an entry is not [worker, kind, payload]"))
        return queued.popleft() if queued else None

    def _slow(self, parts: list[Any]) -> tuple[bytes, ControlMessage] | None:
        got = self._check(parts, 1)
        if got is None:
            return None
        env, msg = got
        if msg.kind == RELAY:
            return self._unbatch(env[0], msg.meta["worker"], msg.meta["payload"])
        return env[0], ControlMessage(msg.kind, msg.meta["worker"], msg.meta["payload"])  # _validate checked both

    def poll(self, timeout_ms: int | None = 0, accept: Callable[[ControlMessage], bool] | None = None,
             limit: int | None = None) -> list[ControlMessage]:
        """Wait up to ``timeout_ms`` for a valid message, then return it and the others already queued
        (at most ``limit``: under a steady flood, as 10,000 workers' heartbeats, the caller still gets
        its turn). A message ``accept`` refuses (e.g. from a worker that has been replaced) is counted
        as ``ignored`` and neither returned nor taken as the worker's route or sign of life. Bad
        messages are dropped and counted; past the deadline at most ``LATE_DRAIN`` of them are skipped
        while no valid one has come."""
        if self._outbox:
            self.flush()
        out: list[ControlMessage] = []
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        taken = late = 0  # valid messages read; bad ones skipped past the deadline before the first
        unbatched, routes, last_seen = self._unbatched, self.routes, self.last_seen
        while limit is None or taken < limit:
            try:
                got = unbatched.popleft() if unbatched else self._take()
            except zmq.Again:
                if taken:
                    break
                wait = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
                if (wait == 0 and late) or not self.sock.poll(wait, zmq.POLLIN):
                    break
                late += wait == 0
                continue
            if got is None:
                if not taken and deadline is not None and time.monotonic() >= deadline:
                    late += 1
                    if late > LATE_DRAIN:
                        break
                continue
            taken += 1
            route, cm = got
            if accept is not None and not accept(cm):
                self.counts["ignored"] += 1
                continue
            routes[cm.worker] = route
            last_seen[cm.worker] = time.monotonic()
            out.append(cm)
        return out

    def take_alive(self, current: Callable[[str], Any]) -> int:
        """Take the relays' signs of life: each ``worker`` whose ``incarnation`` is ``current(worker)`` is
        seen now (its ``last_seen`` and route, as a message of its would); return how many."""
        now, routes, last_seen, taken = time.monotonic(), self.routes, self.last_seen, 0
        while self.alive:
            route, flat = self.alive.popleft()
            for i in range(0, len(flat), 2):
                worker = flat[i]
                if type(worker) is str and current(worker) == flat[i + 1]:
                    routes[worker] = route
                    last_seen[worker] = now
                    taken += 1
        return taken

    def close(self) -> None:
        with contextlib.suppress(zmq.ZMQError):
            self.flush(timeout_ms=0)
        super().close()

    def pending(self) -> bool:
        """Whether a relay batch's messages wait for the next ``poll`` (the socket may have none)."""
        return bool(self._unbatched)

    def forget(self, worker: str) -> None:
        """Drop ``worker``'s route and last sign of life (it is being replaced)."""
        self.routes.pop(worker, None)
        self.last_seen.pop(worker, None)

    def send(self, worker: str, kind: str, payload: dict[str, Any] | None = None, timeout_ms: int = 1000) -> bool:
        """Send a command to ``worker``; False if it never spoke to us, is gone, or its queue stayed full.
        Behind a relay it is queued for that relay (True) and leaves at the next ``poll`` or ``flush``."""
        route = self.routes.get(worker)
        if route is None:
            self.counts["unroutable"] += 1
            return False
        if route in self.relays:
            body = dict(payload or {})
            _check_str_keys(body, 0)  # as ``encode``: a bad key fails here, not the relay's whole batch
            entry = pack_entry(worker, kind, body)
            entries, size = self._outbox.get(route, ([], 0))
            entries.append(entry)
            self._outbox[route] = (entries, size + len(entry))
            if size + len(entry) > OUTBOX_BYTES:
                self._flush_route(route, timeout_ms)
            return True
        try:
            return self._encode_send(kind, None, timeout_ms, meta={"worker": worker, "payload": dict(payload or {})},
                                     envelope=[route])
        except zmq.ZMQError as err:
            if err.errno != zmq.EHOSTUNREACH:
                raise
            self.counts["unroutable"] += 1
            return False

    def flush(self, timeout_ms: int = 1000) -> None:
        """Send the commands queued for relays (``send``), one message per relay."""
        for route in list(self._outbox):
            self._flush_route(route, timeout_ms)

    def _flush_route(self, route: bytes, timeout_ms: int) -> None:
        entries, _ = self._outbox.pop(route)
        try:
            sent = self._send([route, relay_frame(self.trial, self.relays[route], entries)], timeout_ms)
        except zmq.ZMQError as err:
            if err.errno != zmq.EHOSTUNREACH:
                raise
            sent = False
        if not sent:
            self.counts["unroutable"] += len(entries)

    def send_many(self, workers: Iterable[str], kind: str, payload: dict[str, Any] | None = None,
                  timeout_ms: int = 1000) -> list[str]:
        """Send one command to many workers; return those it could not reach. Workers behind the same
        relay get it as one ``relay`` fan-out (up to ``FAN_OUT`` names per message), the rest one by one."""
        if self._outbox:
            self.flush(timeout_ms)  # what was sent before goes first
        failed: list[str] = []
        body = dict(payload or {})
        behind: dict[bytes, list[str]] = {}  # relay route -> its workers, in order

        def fan_out() -> None:
            for route, group in behind.items():
                for first in range(0, len(group), FAN_OUT):
                    chunk = group[first:first + FAN_OUT]
                    meta = {"worker": self.relays[route], "payload": {"workers": chunk, "kind": kind, "payload": body}}
                    try:
                        sent = self._encode_send(RELAY, None, timeout_ms, meta=meta, envelope=[route])
                    except zmq.ZMQError as err:
                        if err.errno != zmq.EHOSTUNREACH:
                            raise
                        sent = False
                    if not sent:
                        self.counts["unroutable"] += len(chunk)
                        failed.extend(chunk)
            behind.clear()

        for worker in workers:
            route = self.routes.get(worker)
            if route is not None and route in self.relays:
                behind.setdefault(route, []).append(worker)
                continue
            fan_out()  # those named before this one go first (``stop``: clients before their servers)
            if not self.send(worker, kind, body, timeout_ms):
                failed.append(worker)
        fan_out()
        return failed


class ControlClient(Endpoint):
    """DEALER, connected. One thread only. Until the connection is up (the controller bound, the
    handshake done) nothing is queued: ``send`` waits up to its ``timeout_ms``, then says False."""

    stream, receives = "control", "commands"
    queue_in_bytes = True

    def __init__(self, address: str | None, trial: str, worker: str, *, ctx: zmq.Context | None = None,
                 kinds: Collection[str] = TO_WORKER, max_bytes: int | None = None) -> None:
        sock = make_socket(context(ctx), zmq.DEALER, sndhwm=10_000, rcvhwm=10_000)
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_S * 1000))
        super().__init__(sock, trial, kinds, max_bytes=max_bytes)
        self.worker = worker
        if address:
            self.connect(address)

    def _validate(self, msg: Message) -> None:
        _unpack(msg)

    def send(self, kind: str, payload: dict[str, Any] | None = None, timeout_ms: int | None = 1000) -> bool:
        """Send ``kind`` (e.g. "heartbeat") with a msgpack-able ``payload``; TypeError if it is not."""
        return self._encode_send(kind, None, timeout_ms, meta={"worker": self.worker, "payload": dict(payload or {})})

    def send_frame(self, body: bytes, timeout_ms: int | None = 1000) -> bool:
        """Send a body already encoded (a relay's batch, ``relay_frame``)."""
        return self._send([body], timeout_ms)

    def recv(self, timeout_ms: int | None = None) -> ControlMessage | None:
        """The next command, or None after ``timeout_ms`` (None: block)."""
        got = self._recv_valid(timeout_ms)
        return None if got is None else _unpack(got[1])
