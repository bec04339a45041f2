"""Samples through shared memory on one host (``layout.shared_memory=true``): the arrays stay in a ring of slots in
``/dev/shm``; only a small descriptor travels over the samples socket.

    ring = SlotRing(trial, slots=8, slot_bytes=n)            # the sender's (SampleSender(shared_memory=True))
    got = ring.acquire(timeout_ms)                           # a free slot (its write lock held), or None
    descriptor = ring.write(got, buffers)                    # the arrays copied in: the sender's only copy
    reader = SlotReader(trial)                               # the receiver's (SampleReceiver(shared_memory=True))
    views = reader.resolve(descriptor)                       # the arrays as views of the slot: no copy

Why: over ZeroMQ a segment is copied by the sender's kernel into the socket, by the receiver's kernel into a frame
libzmq allocated, and by the trainer's join into its batch (bench/RESULTS.md, issue 42). Through a slot it is copied
by the sender into the slot and by the join out of it; a trainer batch that is one whole segment is the slot itself.

The ring is one file, ``/dev/shm/srljax-<trial hash>-<pid>-<random>`` (owner-only): a header (owner pid and start
time, slot count and size), a table of one 64-byte entry per slot (``gen``: written by the sender; ``claimed``:
written by the receiver) and the slots, page aligned. A slot is guarded by Linux open-file-description locks on its
table entry (``F_OFD_SETLK``), which the kernel drops when their holder dies:

* the sender rewrites a slot only under a write lock, bumping ``gen`` first; it takes one only for a slot never
  sent, one whose receiver ``claimed`` it (and has let go: the lock is free), or one unclaimed for
  ``RECLAIM_S`` (its descriptor was lost with a dead receiver's queue);
* the receiver takes a read lock on the slot, then checks the descriptor's ``gen`` (a stale descriptor is dropped:
  ``drop.shm_stale``), writes ``claimed`` and holds the lock until every array made from the slot is gone (a
  ``weakref.finalize`` on the slot's base array: after the trainer's join, or after the update that read a batch
  that was the slot itself). A receiver that dies lets go of its slots with its locks.

A descriptor is a frame ``MAGIC`` + msgpack ``{ring, slot, gen, sizes}`` followed by ``codec.encode``'s header
frame; the arrays lie in the slot in order, each at a multiple of ``ALIGN``. Anything that does not check out (not
msgpack, a ring name not of this trial, a file that is not the owner's regular ring, a slot out of range, sizes past
the slot) is a ``DecodeError`` the receiver drops and counts, never an exception in the trainer. A ring whose owner
died (or that it unlinked) is unlinked and unmapped once nothing received from it is held; ``remove_dead_rings``
sweeps a trial's rings left by killed senders. Linux only (``/dev/shm`` and OFD locks): ``available()`` says.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import mmap
import os
import re
import secrets
import stat
import struct
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from srljax.comm.codec import DecodeError

MAGIC = b"SRLJAX-SHM1\0"  # a descriptor frame's first bytes (a codec header is a msgpack map: never this)
DIR = "/dev/shm"
ALIGN = 64  # each array starts at a multiple of this in its slot (so jax.device_put on CPU aliases it)
PAGE = 4096
RECLAIM_S = 30.0  # a slot sent but never claimed for this long is the sender's again (its descriptor was lost)
SWEEP_S = 1.0  # how often a reader looks for rings whose owner died
MAX_RINGS = 4096  # rings one reader keeps open (a file descriptor each)
MAX_PARTS = 4096
_RING_MAGIC = b"SRLJRNG1"
_HEAD = struct.Struct("<8sIIQQQQ")  # magic, version, slots, slot_bytes, owner pid, owner start time, data offset
_ENTRY = 64  # one slot's table entry: gen (u64), claimed (u64), the rest unused
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux x86-64 / arm64

# drop reasons
SHM_BAD = "shm_bad"  # a descriptor that does not parse or names no ring of this trial
SHM_GONE = "shm_gone"  # its ring is not there (the sender exited and its ring was removed)
SHM_STALE = "shm_stale"  # its slot was rewritten since (or is being)
SHM_OFF = "shm_off"  # a descriptor at a receiver without shared memory


def available() -> str:
    """'' where shared-memory samples work here, else why not."""
    if not hasattr(fcntl, "F_OFD_SETLK"):
        return "open-file-description locks (F_OFD_SETLK) are Linux only"
    if not os.path.isdir(DIR) or not os.access(DIR, os.W_OK):
        return f"{DIR} is not a writable directory"
    return ""


def trial_tag(trial: str) -> str:
    return hashlib.sha256(trial.encode()).hexdigest()[:16]


def _name_re(trial: str) -> re.Pattern:
    return re.compile(rf"srljax-{trial_tag(trial)}-(\d{{1,10}})-[0-9a-f]{{12}}")


def _aligned(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


def _offsets(sizes: Sequence[int]) -> tuple[list[int], int]:
    """Each array's offset in a slot, and the bytes they take."""
    out, at = [], 0
    for size in sizes:
        at = _aligned(at)
        out.append(at)
        at += size
    return out, at


def slot_need(sizes: Sequence[int]) -> int:
    """The slot bytes arrays of ``sizes`` take (each at a multiple of ``ALIGN``)."""
    return _offsets(sizes)[1]


def _lock(fd: int, kind: int, start: int, length: int) -> bool:
    """An OFD lock (F_RDLCK, F_WRLCK or F_UNLCK) on bytes [start, start+length) of ``fd``, not waiting."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, start, length, 0))
        return True
    except OSError as err:
        if err.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise


def _start_time(pid: int) -> int:
    """A process's start time in clock ticks since boot (0 if it is gone): a pid and this name one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return 0
    return int(text[text.rindex(b")") + 2:].split()[19])


def _alive(pid: int, started: int) -> bool:
    return pid > 0 and _start_time(pid) == started


class SlotRing:
    """A sender's ring of ``slots`` slots of ``slot_bytes`` each. One thread only. ``counts``: shm.sent,
    shm.full (no free slot within a send's timeout), shm.reclaimed (unclaimed slots taken back)."""

    def __init__(self, trial: str, slots: int, slot_bytes: int) -> None:
        if slots < 1 or slot_bytes < 1:
            raise ValueError(f"a ring needs slots >= 1 and slot_bytes >= 1, got {slots}, {slot_bytes}")
        why = available()
        if why:
            raise RuntimeError(f"shared-memory samples are not available here: {why}; set layout.shared_memory=false")
        self.slots, self.slot_bytes = slots, _aligned(slot_bytes, PAGE)
        self.table = _aligned(_HEAD.size, _ENTRY)
        self.data = _aligned(self.table + _ENTRY * slots, PAGE)
        pid = os.getpid()
        self.name = f"srljax-{trial_tag(trial)}-{pid}-{secrets.token_hex(6)}"
        self.path = os.path.join(DIR, self.name)
        remove_dead_rings(trial)  # what killed senders of this trial left
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(self.fd, self.data + self.slots * self.slot_bytes)
            self.mm = mmap.mmap(self.fd, 0)
        except BaseException:
            os.close(self.fd)
            os.unlink(self.path)
            raise
        self.mm[:_HEAD.size] = _HEAD.pack(_RING_MAGIC, 1, slots, self.slot_bytes, pid, _start_time(pid), self.data)
        self.entries = np.frombuffer(self.mm, np.uint64, count=slots * _ENTRY // 8, offset=self.table).reshape(slots, -1)
        self.sent_at: list[float | None] = [None] * slots  # when each slot was last sent (None: never)
        self.reserved = [0] * slots  # bytes of each slot given pages (posix_fallocate) so far
        self.counts = {"shm.sent": 0, "shm.full": 0, "shm.reclaimed": 0, "shm.no_space": 0}
        self.closed = False
        self._unlink = weakref.finalize(self, _unlink, self.path)  # at exit too, if close was never called

    def _entry(self, slot: int) -> int:
        return self.table + slot * _ENTRY

    def _free(self, slot: int, now: float) -> bool:
        sent = self.sent_at[slot]
        if sent is None:
            return _lock(self.fd, fcntl.F_WRLCK, self._entry(slot), _ENTRY)
        gen, claimed = int(self.entries[slot, 0]), int(self.entries[slot, 1])
        if claimed != gen and now - sent < RECLAIM_S:
            return False  # on its way to a receiver
        if not _lock(self.fd, fcntl.F_WRLCK, self._entry(slot), _ENTRY):
            return False  # a receiver holds it
        if claimed != gen:
            self.counts["shm.reclaimed"] += 1
        return True

    def acquire(self, timeout_ms: int | None) -> int | None:
        """The lowest free slot (its write lock held until ``write`` or ``cancel``), waiting up to ``timeout_ms``
        (None: forever); None if every slot stayed in use."""
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        pause = 0.0002
        while True:
            now = time.monotonic()
            for slot in range(self.slots):  # lowest first: a ring touches only the slots it needs
                if self._free(slot, now):
                    return slot
            if deadline is not None and now >= deadline:
                self.counts["shm.full"] += 1
                return None
            time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - now)))
            pause = min(pause * 2, 0.005)

    def cancel(self, slot: int) -> None:
        """Give back an acquired slot unwritten."""
        _lock(self.fd, fcntl.F_UNLCK, self._entry(slot), _ENTRY)

    def write(self, slot: int, buffers: Sequence[Any]) -> bytes | None:
        """Copy ``buffers`` into the acquired ``slot`` and let go of it: the descriptor frame to send; None (the slot
        given back unwritten) when ``/dev/shm`` has no room for it."""
        sizes = [memoryview(b).nbytes for b in buffers]
        offsets, total = _offsets(sizes)
        if total > self.slot_bytes:
            self.cancel(slot)
            raise ValueError(f"{total:,} bytes do not fit a slot of {self.slot_bytes:,}")
        base = self.data + slot * self.slot_bytes
        if total > self.reserved[slot]:  # pages first: a write through the mapping to a full tmpfs is a SIGBUS
            try:
                os.posix_fallocate(self.fd, base, _aligned(total, PAGE))
            except OSError:
                self.counts["shm.no_space"] += 1
                self.cancel(slot)
                return None
            self.reserved[slot] = _aligned(total, PAGE)
        gen = int(self.entries[slot, 0]) + 1
        self.entries[slot, 0] = gen  # first: a descriptor of what was here is stale from now on
        dst = np.frombuffer(self.mm, np.uint8, count=self.slot_bytes, offset=base)
        for at, size, buf in zip(offsets, sizes, buffers):
            dst[at:at + size] = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
        del dst
        self.sent_at[slot] = time.monotonic()
        _lock(self.fd, fcntl.F_UNLCK, self._entry(slot), _ENTRY)
        self.counts["shm.sent"] += 1
        return MAGIC + msgpack.packb({"ring": self.name, "slot": slot, "gen": gen, "sizes": sizes})

    def unsent(self, slot: int) -> None:
        """The descriptor of ``slot`` was not sent after all: the slot is free again."""
        self.sent_at[slot] = None

    def in_flight(self) -> int:
        """Slots sent and not yet claimed (within ``RECLAIM_S``)."""
        now = time.monotonic()
        return sum(s is not None and int(self.entries[i, 1]) != int(self.entries[i, 0]) and now - s < RECLAIM_S
                   for i, s in enumerate(self.sent_at))

    def close(self) -> None:
        """Unlink the ring, or, while descriptors are still on their way, at this process's exit (or by a receiver's
        sweep, once this process has exited). Receivers keep what they mapped until they let go of it."""
        if self.closed:
            return
        self.closed = True
        if self.in_flight() and self._unlink.detach() is not None:
            atexit.register(_unlink, self.path)
        else:
            self._unlink()
        del self.entries
        with contextlib.suppress(BufferError):
            self.mm.close()
        os.close(self.fd)


class _Attached:
    """A ring as a reader has it open."""

    def __init__(self, name: str, fd: int, mm: mmap.mmap, slots: int, slot_bytes: int, data: int, pid: int,
                 started: int) -> None:
        self.name, self.fd, self.mm = name, fd, mm
        self.slots, self.slot_bytes, self.data, self.pid, self.started = slots, slot_bytes, data, pid, started
        self.table = _aligned(_HEAD.size, _ENTRY)
        self.entries = np.frombuffer(mm, np.uint64, count=slots * _ENTRY // 8, offset=self.table).reshape(slots, -1)
        self.held: set[int] = set()  # the slots this reader holds (read-locked)
        self.detached = False


class SlotReader:
    """A receiver's side: descriptors -> views of the slots. ``counts``: shm.received, shm.rings (open now),
    shm.rings_removed (of dead senders). Thread-safe for the releases (a finalizer may run in jax's threads)."""

    def __init__(self, trial: str) -> None:
        why = available()
        if why:
            raise RuntimeError(f"shared-memory samples are not available here: {why}; set layout.shared_memory=false")
        self.trial = trial
        self.names = _name_re(trial)
        self.rings: dict[str, _Attached] = {}
        self.lock = threading.RLock()  # a finalizer may run (GC) inside a held section
        self.counts = {"shm.received": 0, "shm.rings": 0, "shm.rings_removed": 0}
        self.next_sweep = 0.0
        self.closed = False

    # -- descriptors ---------------------------------------------------------------------------------------------
    def resolve(self, descriptor: Any, max_bytes: int | None = None) -> list[memoryview]:
        """The arrays a descriptor frame names, as views of its slot (held until all are gone); ``DecodeError``
        when it does not check out."""
        self.sweep()
        buf = memoryview(descriptor).cast("B")
        if buf.nbytes > 64 * 1024 or bytes(buf[:len(MAGIC)]) != MAGIC:
            raise DecodeError(SHM_BAD, "not a descriptor")
        try:
            d = msgpack.unpackb(buf[len(MAGIC):], raw=False)
        except Exception as err:
            raise DecodeError(SHM_BAD, f"descriptor is not msgpack: {err}") from err
        if not isinstance(d, dict) or set(d) != {"ring", "slot", "gen", "sizes"}:
            raise DecodeError(SHM_BAD, "descriptor fields")
        name, slot, gen, sizes = d["ring"], d["slot"], d["gen"], d["sizes"]
        if not (isinstance(name, str) and type(slot) is int and type(gen) is int and isinstance(sizes, list)
                and len(sizes) <= MAX_PARTS and all(type(s) is int and s >= 0 for s in sizes)):
            raise DecodeError(SHM_BAD, "descriptor field types")
        if not self.names.fullmatch(name):
            raise DecodeError(SHM_BAD, f"ring {name[:80]!r} is not one of this trial's")
        ring = self._attach(name)
        if not 0 <= slot < ring.slots:
            raise DecodeError(SHM_BAD, f"slot {slot} of a ring of {ring.slots}")
        offsets, total = _offsets(sizes)
        if total > ring.slot_bytes:
            raise DecodeError(SHM_BAD, f"{total:,} bytes in a slot of {ring.slot_bytes:,}")
        if max_bytes is not None and sum(sizes) > max_bytes:
            from srljax.comm.sockets import TOO_BIG

            raise DecodeError(TOO_BIG, f"{sum(sizes):,} bytes in shared memory, over {max_bytes:,}")
        entry = ring.table + slot * _ENTRY
        if slot in ring.held:  # a second descriptor of a slot this reader holds (no sender can have rewritten it)
            raise DecodeError(SHM_STALE, f"slot {slot} is held here already")
        if not _lock(ring.fd, fcntl.F_RDLCK, entry, _ENTRY):
            raise DecodeError(SHM_STALE, f"slot {slot} is being rewritten")
        if int(ring.entries[slot, 0]) != gen:
            _lock(ring.fd, fcntl.F_UNLCK, entry, _ENTRY)
            raise DecodeError(SHM_STALE, f"slot {slot} is at generation {int(ring.entries[slot, 0])}, not {gen}")
        ring.entries[slot, 1] = gen
        base = np.frombuffer(ring.mm, np.uint8, count=ring.slot_bytes, offset=ring.data + slot * ring.slot_bytes)
        base.flags.writeable = False  # the arrays made from it are read-only, as a received bytes frame's
        with self.lock:
            ring.held.add(slot)
        weakref.finalize(base, self._release, ring, slot)
        self.counts["shm.received"] += 1
        view = memoryview(base)
        return [view[at:at + size] for at, size in zip(offsets, sizes)]

    def _attach(self, name: str) -> _Attached:
        ring = self.rings.get(name)
        if ring is not None:
            return ring
        if len(self.rings) >= MAX_RINGS:
            self.sweep(force=True)
            if len(self.rings) >= MAX_RINGS:
                raise DecodeError(SHM_BAD, f"more than {MAX_RINGS} rings open")
        try:
            fd = os.open(os.path.join(DIR, name), os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError as err:
            raise DecodeError(SHM_GONE, f"ring {name} is gone") from err
        except OSError as err:
            raise DecodeError(SHM_BAD, f"ring {name}: {err}") from err
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size < _HEAD.size:
                raise DecodeError(SHM_BAD, f"ring {name} is not a ring of this user")
            mm = mmap.mmap(fd, 0)
            magic, version, slots, slot_bytes, pid, started, data = _HEAD.unpack_from(mm, 0)
            table = _aligned(_HEAD.size, _ENTRY)
            if (magic != _RING_MAGIC or version != 1 or not 1 <= slots <= 1 << 16 or slot_bytes % PAGE
                    or data < table + slots * _ENTRY or data % PAGE or st.st_size != data + slots * slot_bytes):
                mm.close()
                raise DecodeError(SHM_BAD, f"ring {name}'s header does not add up")
        except BaseException:
            os.close(fd)
            raise
        ring = _Attached(name, fd, mm, slots, slot_bytes, data, pid, started)
        self.rings[name] = ring
        self.counts["shm.rings"] = len(self.rings)
        return ring

    def _release(self, ring: _Attached, slot: int) -> None:
        with self.lock:
            if not ring.detached:
                _lock(ring.fd, fcntl.F_UNLCK, ring.table + slot * _ENTRY, _ENTRY)
            ring.held.discard(slot)

    # -- rings of senders that are gone ---------------------------------------------------------------------------
    def sweep(self, force: bool = False) -> None:
        """Every ``SWEEP_S``: drop the rings whose owner died or unlinked them, once nothing of theirs is held
        (their memory goes back when the last mapping does)."""
        now = time.monotonic()
        if not force and now < self.next_sweep:
            return
        self.next_sweep = now + SWEEP_S
        for name, ring in list(self.rings.items()):
            dead = not _alive(ring.pid, ring.started)
            try:
                unlinked = os.fstat(ring.fd).st_nlink == 0
            except OSError:
                unlinked = True
            if not (dead or unlinked):
                continue
            if dead and not unlinked:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(DIR, name))
                self.counts["shm.rings_removed"] += 1
            with self.lock:
                if ring.held:
                    continue  # views of it still live; next sweep
                self._detach(ring)
            del self.rings[name]
        self.counts["shm.rings"] = len(self.rings)

    def _detach(self, ring: _Attached) -> None:
        ring.detached = True
        del ring.entries
        with contextlib.suppress(BufferError):  # arrays made from it keep the mapping until they go
            ring.mm.close()
        os.close(ring.fd)

    def close(self) -> None:
        """Close every ring's file (the mappings go with the last array made from them)."""
        if self.closed:
            return
        self.closed = True
        with self.lock:
            for ring in self.rings.values():
                self._detach(ring)
        self.rings.clear()


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def remove_dead_rings(trial: str, also_pid: int | None = None) -> int:
    """Unlink the rings of ``trial`` whose owner is dead (a sender killed before it could), and those of process
    ``also_pid`` (the controller's, once its threads-backend workers have stopped); how many."""
    pattern, removed = _name_re(trial), 0
    try:
        names = os.listdir(DIR)
    except OSError:
        return 0
    for name in names:
        if not pattern.fullmatch(name):
            continue
        path = os.path.join(DIR, name)
        try:
            with open(path, "rb") as f:
                head = f.read(_HEAD.size)
            magic, _, _, _, pid, started, _ = _HEAD.unpack(head)
        except (OSError, struct.error):
            continue
        if magic == _RING_MAGIC and (pid == also_pid or not _alive(pid, started)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed += 1
    return removed
