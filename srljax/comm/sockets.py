"""Socket plumbing shared by the streams: options, binding, and the drop-and-count receive loop.

    sock = make_socket(zmq.Context.instance(), zmq.PULL, rcvhwm=4)
    addr = bind(sock, "tcp://127.0.0.1:*")   # -> "tcp://127.0.0.1:40123", register it in names
    addr = bind(sock, "ipc://*")             # -> "ipc:///tmp/srljax-1f2e3d4c5b6a.sock"

Every stream is an ``Endpoint``: it owns one socket (use it from one thread only), closes on
``close()`` / ``with``, and exposes ``counters()`` such as ``{"received": 10, "drop.kind": 1}``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Collection
from typing import Any, ClassVar

import zmq
from zmq.utils.monitor import recv_monitor_message

from srljax.comm.codec import (
    FRAMES,
    DecodeError,
    DropCounter,
    Message,
    decode,
    encode,
    pack,
    packed_bound,
    unpack,
)
from srljax.comm.security import MIN_HWM, rules_of

LINGER_MS = 200  # close() waits at most this long for unsent messages, so shutdown never hangs
LIBZMQ_HANDSHAKE_MS = 30_000  # libzmq's default ZMQ_HANDSHAKE_IVL
IPC_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin
LATE_DRAIN = 10_000  # past its deadline a receive still skips this many queued bad messages, then gives up
HANDSHAKE_EVENTS = {zmq.EVENT_HANDSHAKE_FAILED_AUTH: "auth_refused",  # ZAP said no (either side sees it)
                    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshake_failed",  # e.g. a server key that is not the pinned one
                    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake_failed",
                    zmq.EVENT_ACCEPT_FAILED: "accept_failed"}  # e.g. EMFILE: a flood of idle connections took them
TOO_BIG = "too_big"  # drop reason: a message whose frames together pass the socket's message bound
MESSAGE_FRAMES = 4  # a socket that knows only its frame bound takes messages of at most this many such frames
CONTROL_RECEIVES = frozenset({"control", "commands", "subscriptions"})  # bounds the trial sets itself, not capped
SERVER_HANDSHAKE_S = 3.0
"""ZMQ_HANDSHAKE_IVL of a bound data stream (samples, params, inference; libzmq's default: 30 s): a connection that
has not finished its handshake by then is dropped, so a flood of idle connections (no greeting, no key) holds this
process's file descriptors for seconds, not until the flooder lets go (``srljax.storage.descriptors``). A peer
that is merely slow reconnects and tries again. The control channel sets its own (``control.HANDSHAKE_S``)."""


def make_socket(ctx: zmq.Context, socket_type: int, *, sndhwm: int | None = None,
                rcvhwm: int | None = None) -> zmq.Socket:
    """A socket with LINGER bounded, IPv6 off and optional high-water marks (in messages)."""
    sock = ctx.socket(socket_type)
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    sock.setsockopt(zmq.IPV6, 0)
    if sndhwm is not None:
        sock.setsockopt(zmq.SNDHWM, sndhwm)
    if rcvhwm is not None:
        sock.setsockopt(zmq.RCVHWM, rcvhwm)
    return sock


def bind(sock: zmq.Socket, address: str) -> str:
    """Bind ``address`` (``tcp://host:*`` picks a free port; ``ipc://*`` a fresh temp path); return the real one.

    Bind to the interface peers will use: ``tcp://0.0.0.0:*`` comes back as ``0.0.0.0``, which
    is no use to a peer on another host. libzmq leaves the ipc socket file behind on close (and
    replaces a stale one on bind); ``Endpoint.close`` removes the ones ``ipc://*`` made up.
    """
    if address == "ipc://*":  # libzmq's own ``ipc://*`` lands in the cwd when $TMPDIR is unset
        address = f"ipc://{tempfile.gettempdir()}/srljax-{uuid.uuid4().hex[:12]}.sock"
    if address.startswith("ipc://") and len(address) - len("ipc://") > IPC_PATH_MAX:
        raise ValueError(f"ipc path longer than {IPC_PATH_MAX} characters: {address}")
    sock.bind(address)
    return sock.getsockopt_string(zmq.LAST_ENDPOINT)


def bind_random(sock: zmq.Socket, host: str = "127.0.0.1") -> str:
    """Bind a free TCP port on ``host``; return ``tcp://host:port``."""
    return bind(sock, f"tcp://{host}:*")


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def give_back_memory() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``; nothing elsewhere). libzmq holds a multipart
    message's frames in many small allocations, which glibc keeps after they are freed: without this, one
    dropped 800 MB message of 14,000 frames left the process 655 MB larger for good."""
    if _TRIM is not None:
        _TRIM(0)


KEEP_MMAP_THRESHOLD = 32 << 20
"""glibc's largest mmap threshold (``M_MMAP_THRESHOLD``): a frame up to this size comes from the heap, where a freed one
is reused, instead of from a fresh mapping that the kernel zeroes and faults in page by page."""
KEEP_TOP_PAD = 64 << 20  # a thread arena's whole heap (glibc's HEAP_MAX_SIZE): zmq's I/O thread keeps its heaps
KEEP_TRIM_THRESHOLD = 1 << 30  # freed memory at the top of the heap beyond this goes back to the OS
_MALLOPT = {"M_TRIM_THRESHOLD": -1, "M_TOP_PAD": -2, "M_MMAP_THRESHOLD": -3}


def keep_freed_memory() -> bool:
    """Let a process that receives big frames reuse freed memory for the next ones (glibc ``mallopt``; False and
    nothing done elsewhere). Call it in a process that serves a samples stream, before its traffic starts.

    libzmq allocates every received frame afresh (one ``malloc`` of the frame's size in its I/O thread, which the
    kernel then fills from the socket), and nothing lets a caller hand it a buffer of its own. glibc serves an
    allocation of 32 MB or more (and, while its dynamic threshold has not risen, 128 KB or more) from a fresh
    ``mmap`` and unmaps it on free; a thread arena gives its emptied heaps back too. So every received frame of an
    Atari segment (29 MB) was memory the kernel had to zero and fault in: perf on a receiver that only received
    (issue 42) had 37% of its CPU in ``clear_page_erms`` and 21% in the socket copy itself. With the heap kept
    (threshold raised to ``KEEP_MMAP_THRESHOLD``, the top pad a whole thread-arena heap, trimming only past 1 GB of
    free top), the frames of one message land in memory freed by the message before: page faults per 29 MB
    message fell from ~1,490 to ~130. What this keeps is at most the process's own peak, and
    ``give_back_memory`` still returns it (a dropped too-big message does). Frames above 32 MB are still fresh
    mappings (glibc allows no higher threshold), which is why a buffer's messages stay below it
    (``srljax.system.staging.buffer``)."""
    if _MALLOPT_FN is None:
        return False
    ok = True
    for name, value in (("M_MMAP_THRESHOLD", KEEP_MMAP_THRESHOLD), ("M_TOP_PAD", KEEP_TOP_PAD),
                        ("M_TRIM_THRESHOLD", KEEP_TRIM_THRESHOLD)):
        ok = bool(_MALLOPT_FN(_MALLOPT[name], value)) and ok
    return ok


def _mallopt() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None).mallopt
    except (OSError, AttributeError):  # not glibc
        return None


_MALLOPT_FN = _mallopt()


class Endpoint:
    """One socket plus counters; the streams derive from this.

    A socket made from a ``WireContext`` follows its rules (``srljax/comm/security.py``): CURVE on
    bind and connect, ``ZMQ_MAXMSGSIZE`` = ``max_bytes`` or the rules' limit for what this endpoint
    ``receives``, and (ROUTER/DEALER streams, whose HWMs are large) its receive queue capped in
    bytes as well as in messages. Samples and params keep their few-message HWMs.

    Every message's frames together are bounded too (``max_message``: ``max_message_bytes``, else the
    rules' ``message_limits``, else ``MESSAGE_FRAMES`` frame bounds; ``layout.max_message_bytes`` caps it on
    data streams): libzmq hands a multipart message over only once all its frames have arrived, so a peer
    can make it hold one message, but a larger one is dropped before decoding (``drop.too_big``), its
    frames freed at once and the heap given back (``give_back_memory``); nothing of it is kept.
    """

    stream: ClassVar[str] = ""  # control, samples, params, inference: the ZAP domain, and which server key to pin
    receives: ClassVar[str] = ""  # the key of ``WireRules.limits`` bounding what this endpoint receives
    queue_in_bytes: ClassVar[bool] = False  # cap RCVHWM at ``queue_bytes // max_bytes`` (large message HWMs)
    single_frame: ClassVar[bool] = False  # the body travels as one frame (``codec.pack``): small messages between
    # clients and servers that come and go (a multipart one torn by a vanishing peer aborts libzmq)

    def __init__(self, sock: zmq.Socket, trial: str, kinds: Collection[str] | None, *,
                 max_bytes: int | None = None, max_message_bytes: int | None = None) -> None:
        self.sock = sock
        self.trial = trial
        self.kinds = None if kinds is None else frozenset(kinds)
        self.address = ""  # the bound address, for servers
        self._made_up_ipc = ""
        self.drops = DropCounter()
        self.counts: Counter[str] = Counter()  # sent, received, send_timeouts, ...
        self.tracker: zmq.MessageTracker | None = None  # the last tracked send's (``_send(track=True)``)
        self.rules = rules_of(sock)
        if max_bytes is None and self.rules is not None:
            max_bytes = self.rules.limits.get(self.receives)
        self.max_message = self._message_bound(max_bytes, max_message_bytes)
        if max_bytes and max_bytes > 0 and self.max_message:
            max_bytes = min(max_bytes, self.max_message)  # a frame cannot be larger than its message
            if self.single_frame:  # the frame is the message, with its parts' table and alignment
                max_bytes = packed_bound(self.max_message)
        self.max_bytes = max_bytes
        if max_bytes:
            sock.setsockopt(zmq.MAXMSGSIZE, max_bytes)
            queue_bytes = self.rules.queue_bytes if self.rules is not None and self.queue_in_bytes else 0
            hwm, cap = sock.getsockopt(zmq.RCVHWM), max(MIN_HWM, queue_bytes // max_bytes)
            if queue_bytes and (hwm == 0 or hwm > cap):
                sock.setsockopt(zmq.RCVHWM, cap)
        self._monitor = None  # handshake failures, counted when CURVE is on
        if self.rules is not None and self.rules.keys is not None:
            self._monitor = sock.get_monitor_socket(sum(HANDSHAKE_EVENTS))

    def _message_bound(self, max_bytes: int | None, max_message_bytes: int | None) -> int | None:
        rules = self.rules
        bound = max_message_bytes or (rules.message_limits.get(self.receives) if rules is not None else None)
        if not bound and max_bytes and max_bytes > 0:  # -1: unbounded (libzmq's default)
            bound = MESSAGE_FRAMES * max_bytes
        cap = rules.max_message_bytes if rules is not None and self.receives not in CONTROL_RECEIVES else 0
        if cap:
            bound = min(bound, cap) if bound else cap
        return bound or None

    def counters(self) -> dict[str, int]:
        """Flat counters for metrics: ``{"sent": .., "received": .., "drop.<reason>": ..}``."""
        self._count_handshakes()
        return {**self.counts, **{f"drop.{reason}": n for reason, n in self.drops.items()}}

    def _count_handshakes(self) -> None:
        while self._monitor is not None and self._monitor.poll(0):
            event = recv_monitor_message(self._monitor)["event"]
            self.counts[HANDSHAKE_EVENTS.get(event, "handshake_other")] += 1

    def connect(self, address: str) -> None:
        """Connect to one more peer (PUSH/DEALER round-robin over them; SUB hears them all)."""
        if self.rules is not None:
            self.rules.secure_client(self.sock, self.stream, address)  # pins this server's key
        self.sock.connect(address)

    def disconnect(self, address: str) -> None:
        """Stop talking to ``address`` (a peer that restarted elsewhere); what was queued for it is dropped."""
        with contextlib.suppress(zmq.ZMQError):  # never connected, or already gone
            self.sock.disconnect(address)

    def bind(self, address: str) -> str:
        """Bind (see ``bind``), remember the real address in ``self.address`` and return it."""
        if self.rules is not None:
            self.rules.secure_server(self.sock, self.stream)
        if self.sock.getsockopt(zmq.HANDSHAKE_IVL) == LIBZMQ_HANDSHAKE_MS:  # not chosen by the stream itself
            self.sock.setsockopt(zmq.HANDSHAKE_IVL, int(SERVER_HANDSHAKE_S * 1000))
        self.address = bind(self.sock, address)
        if address == "ipc://*":
            self._made_up_ipc = self.address.removeprefix("ipc://")
        return self.address

    def close(self) -> None:
        if self._monitor is not None:
            self._count_handshakes()
            self.sock.disable_monitor()
            self._monitor.close(linger=0)
            self._monitor = None
        self.sock.close(linger=LINGER_MS)
        if self._made_up_ipc:  # nobody else can be bound to a fresh random path
            with contextlib.suppress(OSError):
                os.unlink(self._made_up_ipc)
            self._made_up_ipc = ""

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending -------------------------------------------------------------------------------
    def _send(self, frames: list[Any], timeout_ms: int | None, track: bool = False) -> bool:
        """Send without copying big buffers; False if the socket stayed full for ``timeout_ms``. ``track``: the
        frames zmq reads in place (``zmq.COPY_THRESHOLD`` bytes or more) are tracked, and ``self.tracker`` (a
        ``zmq.MessageTracker``) says when zmq has let go of all of them (after a True return)."""
        if track:
            tracked = [zmq.Frame(f, copy=False, track=True) for f in frames
                       if isinstance(f, memoryview) and f.nbytes >= zmq.COPY_THRESHOLD]
            it = iter(tracked)
            frames = [next(it) if isinstance(f, memoryview) and f.nbytes >= zmq.COPY_THRESHOLD else f for f in frames]
            self.tracker = zmq.MessageTracker(*tracked)
        if timeout_ms is None:
            self.sock.send_multipart(frames, copy=False)
        else:
            # poll then NOBLOCK: a multipart message is queued whole once its first part is accepted
            if not self.sock.poll(max(0, timeout_ms), zmq.POLLOUT):
                self.counts["send_timeouts"] += 1
                return False
            try:
                self.sock.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
            except zmq.Again:
                self.counts["send_timeouts"] += 1
                return False
        self.counts["sent"] += 1
        return True

    def _encode_send(self, kind: str, tree: Any, timeout_ms: int | None, *, version: int = -1,
                     meta: dict[str, Any] | None = None, envelope: list[bytes] | None = None,
                     track: bool = False) -> bool:
        frames = encode(kind, self.trial, tree, version=version, meta=meta)
        if self.single_frame:
            frames = [pack(frames)]
        return self._send([*(envelope or []), *frames], timeout_ms, track)

    # -- receiving -----------------------------------------------------------------------------
    def _recv_valid(self, timeout_ms: int | None, envelope: int = 0) -> tuple[list[Any], Message] | None:
        """The first message that decodes within ``timeout_ms`` (None: wait forever), else None.

        ``envelope`` leading frames (a ROUTER's peer id) are split off before decoding. Bad
        messages are counted in ``drops`` and skipped; nothing but a closed socket raises here.
        """
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        late = 0  # bounded, so a flood of garbage cannot hold a timed receive forever
        while late <= LATE_DRAIN:
            wait = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            late += wait == 0
            if not self.sock.poll(wait, zmq.POLLIN):
                return None
            try:
                frames = self._recv_parts()
            except zmq.Again:
                continue
            got = self._check(frames, envelope)
            if got is not None:
                return got
        return None

    def _drain_valid(self, timeout_ms: int | None, envelope: int = 0,
                     limit: int | None = None) -> list[tuple[list[Any], Message]]:
        """Wait up to ``timeout_ms`` for one valid message, then take all already queued (at most ``limit``)."""
        first = self._recv_valid(timeout_ms, envelope)
        if first is None:
            return []
        out = [first]
        while limit is None or len(out) < limit:
            try:
                frames = self._recv_parts()
            except zmq.Again:
                break
            got = self._check(frames, envelope)
            if got is not None:
                out.append(got)
        return out

    def _check(self, frames: list[Any], envelope: int) -> tuple[list[Any], Message] | None:
        try:
            if len(frames) <= envelope:
                raise DecodeError(FRAMES, "no body after the envelope")
            body = self._resolve(frames[envelope:])
            if self.single_frame:
                if len(body) != 1:
                    raise DecodeError(FRAMES, f"{len(body)} body frames on a one-frame stream")
                body = unpack(body[0])
            msg = decode(body, self.trial, self.kinds)
            self._validate(msg)
            self._check_sender(frames[envelope], msg)
        except DecodeError as err:
            self.drops.add(err)
            return None
        self.counts["received"] += 1
        return [f if isinstance(f, bytes) else f.bytes for f in frames[:envelope]], msg

    def _recv_parts(self) -> list[Any]:
        """One queued message's parts within ``max_message`` bytes, without blocking (``zmq.Again`` if none):
        zero-copy ``Frame``s. A larger message is dropped (``drop.too_big``) and the next one read."""
        while True:
            frames = self.sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            if self.max_message is None or len(frames) == 1 or \
                    sum(map(len, frames)) <= self.max_message:
                return frames
            self.drop_too_big(frames)

    def drop_too_big(self, frames: list[Any]) -> None:
        """Count a message past ``max_message`` and let its frames go at once, giving the heap back."""
        size, count = sum(map(len, frames)), len(frames)
        frames.clear()  # the caller's list: the frames' memory is freed here, before the trim
        self.drops.add(DecodeError(TOO_BIG, f"{size:,} bytes in {count} frames, over {self.max_message:,}"))
        give_back_memory()

    def _resolve(self, body: list[Any]) -> list[Any]:
        """The message's frames as ``decode`` takes them (``SampleReceiver``: a shared-memory descriptor's arrays)."""
        return body

    def _validate(self, msg: Message) -> None:
        """Stream-specific checks on a decoded message; raise DecodeError to drop it."""

    def _check_sender(self, frame: Any, msg: Message) -> None:
        """Checks on who sent it (``sender_identity(frame)``); raise DecodeError to drop it."""


SENDER = "sender"  # drop reason: an authenticated peer sent what its identity may not send


def sender_identity(frame: Any) -> str | None:
    """The CURVE identity the context's ZAP handler admitted the sender as; None without CURVE."""
    try:
        return frame.get("User-Id") or None
    except (zmq.ZMQError, AttributeError):  # NULL mechanism, or a copied frame
        return None


def context(ctx: zmq.Context | None) -> zmq.Context:
    """``ctx`` or the process-wide shared context."""
    return ctx if ctx is not None else zmq.Context.instance()
