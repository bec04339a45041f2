"""CURVE authentication and receive bounds for a trial's sockets, carried by the zmq context.

    keys = KeyRing.generate(["controller", "trainer", "actor"])      # one key pair per identity
    keys.write(run_dir / "keys")                  # 0700 folder, 0600 files (zmq certificate format)
    ctx = WireContext(WireRules(keys=KeyRing.load(run_dir / "keys"), identity="actor",
                                pinned={"control": "controller", "params": "trainer"}))
    rx = SampleReceiver("tcp://127.0.0.1:*", trial, ctx=ctx)   # binds as a CURVE server, actor's key
    ctx.rules.peer_roles[rx.address] = "actor"   # who serves an address (from the configure message)
    tx = SampleSender(rx.address, trial, ctx=ctx) # pins the key of the role serving that address
    ctx.close()                                   # stops the ZAP handler, terms the context

Every stream made with such a context applies its rules: a bind is a CURVE server whose ZAP handler admits
only the ring's keys (naming the peer's identity as ``User-Id``); a connect pins the server's public key (the
stream's ``pinned`` identity, else ``peer_roles``), so only the trainer can publish params and only the
controller can command; every receiver is bounded (``ZMQ_MAXMSGSIZE`` per frame, the sum of a message's frames, ROUTER/DEALER queues
per peer), also with ``layout.auth=off``. Refused handshakes are counted (``auth_refused``, ``handshake_failed``).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.utils.z85

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_POLL_MS = 200  # how often the handler looks at its stop flag
QUEUE_BYTES = 64 << 20  # a receiving socket's queue per peer, in bytes (RCVHWM = this // frame limit)
MIN_HWM = 2


class AuthError(ValueError):
    """Keys missing, unreadable or too open; the message says which file and what to do."""


@dataclass(frozen=True)
class KeyRing:
    """identity -> (public, secret) CURVE keys, z85 bytes; ``secret`` is None where only the public key is known."""

    pairs: dict[str, tuple[bytes, bytes | None]]

    @classmethod
    def generate(cls, identities: list[str]) -> KeyRing:
        return cls({name: zmq.curve_keypair() for name in identities})

    def public(self, identity: str) -> bytes:
        try:
            return self.pairs[identity][0]
        except KeyError:
            raise AuthError(f"no CURVE key for {identity!r} in this trial's keys ({', '.join(self.pairs)})") from None

    def secret(self, identity: str) -> bytes:
        secret = self.pairs.get(identity, (b"", None))[1]
        if secret is None:
            raise AuthError(f"no secret CURVE key for {identity!r}: this process cannot act as it")
        return secret

    def identity_of(self, public_z85: bytes) -> str | None:
        for name, (public, _) in self.pairs.items():
            if public == public_z85:
                return name
        return None

    def write(self, folder: str | os.PathLike[str]) -> Path:
        """``folder/<identity>.key`` and ``.key_secret`` (zmq certificate format), owner-only, before any worker starts."""
        root = Path(folder)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)  # mkdir's mode is masked by the umask, and the folder may exist
        for name, (public, secret) in self.pairs.items():
            _write_private(root / f"{name}.key", _certificate(public, None))
            if secret is not None:
                _write_private(root / f"{name}.key_secret", _certificate(public, secret))
        return root

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> KeyRing:
        """Every certificate in ``folder``; refuses a folder or file others can read (fix: ``chmod -R go-rwx``)."""
        root = Path(folder)
        if not root.is_dir():
            raise AuthError(f"no key folder {root}: layout.auth is on but the launcher wrote no keys "
                            f"(start the trial with python -m launch.local / launch.slurm, or set layout.auth=off)")
        for path in [root, *root.iterdir()]:
            if path.stat().st_mode & 0o077:
                raise AuthError(f"{path} is readable by others (mode {path.stat().st_mode & 0o777:o}); "
                                f"fix: chmod -R go-rwx {root}")
        pairs: dict[str, tuple[bytes, bytes | None]] = {}
        for path in sorted(root.glob("*.key")):
            pairs[path.stem] = (_read_key(path, "public-key"), None)
        for path in sorted(root.glob("*.key_secret")):
            pairs[path.stem] = (_read_key(path, "public-key"), _read_key(path, "secret-key"))
        if not pairs:
            raise AuthError(f"no keys in {root}")
        return cls(pairs)


def _certificate(public: bytes, secret: bytes | None) -> str:
    lines = ["#   ZeroMQ CURVE certificate (srljax trial key; keep private)", "metadata", "curve",
             f'    public-key = "{public.decode()}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    return "\n".join(lines) + "\n"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def _read_key(path: Path, field_name: str) -> bytes:
    for line in path.read_text().splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip() == field_name:
            value = value.strip().strip('"')
            if len(value) == 40:
                return value.encode()
    raise AuthError(f"{path} holds no {field_name}")


class ZapHandler:
    """The context's ZAP handler (a thread): admits CURVE clients holding one of ``keys``' public keys.

    The admitted client's ``User-Id`` is its identity name; ``refused[domain]`` counts the rest.
    """

    def __init__(self, ctx: zmq.Context, keys: KeyRing):
        self.keys = keys
        self.refused: Counter[str] = Counter()
        self.admitted: Counter[str] = Counter()
        self._sock = ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(ZAP_ENDPOINT)  # before any server socket exists: none is ever unguarded
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the thread's end vs ``close``: who runs ``then``
        self._ended = False
        self._then: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._serve, name="zap", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._sock.poll(ZAP_POLL_MS):
                    continue
                request = self._sock.recv_multipart()
                self._sock.send_multipart(self._answer(request))
        finally:
            self._sock.close(linger=0)
            with self._lock:
                self._ended, then, self._then = True, self._then, None
            if then is not None:  # ``close`` stopped waiting for this thread: what it would have done
                then()

    def _answer(self, request: list[bytes]) -> list[bytes]:
        if len(request) < 6:
            return [b"1.0", request[1] if len(request) > 1 else b"", b"400", b"bad request", b"", b""]
        version, request_id, domain, _address, _routing_id, mechanism = request[:6]
        identity = None
        if mechanism == b"CURVE" and len(request) == 7 and len(request[6]) == 32:
            identity = self.keys.identity_of(zmq.utils.z85.encode(request[6]))
        where = domain.decode(errors="replace")
        if version != b"1.0" or identity is None:
            self.refused[where] += 1
            return [b"1.0", request_id, b"400", b"not a key of this trial", b"", b""]
        self.admitted[where] += 1
        return [b"1.0", request_id, b"200", b"OK", identity.encode(), b""]

    def close(self, then: Callable[[], None] | None = None) -> None:
        """Stop the thread; ``then()`` once its socket is closed: here when the thread ends within a short
        wait, else in the thread as it ends. A socket must never be closed (e.g. by ``Context.destroy``)
        while another thread is inside a receive on it: libzmq aborts the whole process on the torn read
        (``Assertion failed: !_more (src/fq.cpp)``), as a starved ZAP thread past a fixed join timeout did."""
        with self._lock:
            self._stop.set()
            self._then = then
        self._thread.join(timeout=2 * ZAP_POLL_MS / 1000 + 1)
        with self._lock:
            then, self._then = (self._then, None) if self._ended else (None, self._then)
        if then is not None:
            then()


@dataclass
class WireRules:
    """What every socket of one worker (or the controller) applies; see the module docstring."""

    keys: KeyRing | None = None  # None: no CURVE (layout.auth=off)
    identity: str = ""  # whose key pair this process uses
    pinned: dict[str, str] = field(default_factory=dict)  # stream -> the only identity that may serve it
    peer_roles: dict[str, str] = field(default_factory=dict)  # server address -> identity serving it
    limits: dict[str, int] = field(default_factory=dict)  # what an endpoint receives -> max bytes per frame
    message_limits: dict[str, int] = field(default_factory=dict)  # ... -> max bytes per message, frames together
    max_message_bytes: int = 0  # layout.max_message_bytes: caps every data stream's message bound (0: no cap)
    queue_bytes: int = QUEUE_BYTES
    max_params_version: int | None = None  # a params version above this is refused (the trial's last update)

    def server_identity(self, stream: str, address: str) -> str:
        identity = self.pinned.get(stream) or self.peer_roles.get(address)
        if identity is None:
            raise AuthError(f"cannot connect to {address} ({stream}): it is not a server this worker was told "
                            f"about, so there is no key to pin (connect to addresses from the configure message)")
        return identity

    def secure_server(self, sock: zmq.Socket, stream: str) -> None:
        if self.keys is None:
            return
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.keys.secret(self.identity))
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.ZAP_DOMAIN, stream.encode())

    def secure_client(self, sock: zmq.Socket, stream: str, address: str) -> None:
        if self.keys is None:
            return
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.keys.public(self.identity))
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.keys.secret(self.identity))
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.keys.public(self.server_identity(stream, address)))


class WireContext(zmq.Context):
    """A zmq context whose sockets follow ``rules`` (auth, bounds); runs a ZAP handler when there are keys."""

    rules: WireRules
    zap: ZapHandler | None

    def __init__(self, rules: WireRules | None = None, io_threads: int = 1) -> None:
        super().__init__(io_threads)
        self.rules = rules or WireRules()
        self.zap = None
        if self.rules.keys is not None:
            if not zmq.has("curve"):
                raise RuntimeError("layout.auth is on but this pyzmq/libzmq has no CURVE support (libsodium); "
                                   "install pyzmq from its wheels, or set layout.auth=off")
            self.zap = ZapHandler(self, self.rules.keys)

    def close(self) -> None:
        """Stop the ZAP handler and end the context, closing sockets still open (their owners are done)."""
        if self.zap is None:
            self.destroy(linger=0)
        else:  # only once the ZAP thread has left its socket (now, or when that thread ends)
            self.zap.close(then=lambda: self.destroy(linger=0))


def rules_of(sock: zmq.Socket) -> WireRules | None:
    return getattr(sock.context, "rules", None)
