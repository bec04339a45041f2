"""A doorbell: a file descriptor any thread can ring, polled beside a ZeroMQ socket, so a thread that waits on
the socket also wakes when another thread hands it work.

    bell = Doorbell()
    bell.ring()                          # any thread (after queueing the work)
    if bell.wait(sock, timeout_ms=250):  # the owner: True if ``sock`` has a message; a ring ends the wait too
        msg = sock.recv_multipart()
    bell.close()

A worker's control thread waits this way (``srljax/system/shell/worker.py``): for a command from the controller or a
message the worker queued, else until its next heartbeat, instead of waking every 20 ms to look. An eventfd on
Linux (one descriptor), a pipe elsewhere.
"""

from __future__ import annotations

import os
import sys
import threading

import zmq

_ONE = (1).to_bytes(8, sys.byteorder)


class Doorbell:
    def __init__(self) -> None:
        if hasattr(os, "eventfd"):
            self._read = self._write = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._token = _ONE
        else:
            self._read, self._write = os.pipe()
            os.set_blocking(self._read, False)
            os.set_blocking(self._write, False)
            self._token = b"x"
        self._lock = threading.Lock()  # ring vs close: never write to a descriptor number reused elsewhere
        self._closed = False
        self._poller = zmq.Poller()
        self._sock: zmq.Socket | None = None

    def ring(self) -> None:
        """Wake the waiter (or its next wait). Thread-safe; a no-op once closed."""
        with self._lock:
            if self._closed:
                return
            try:
                os.write(self._write, self._token)
            except BlockingIOError:  # a full pipe: it is ringing already
                pass

    def wait(self, sock: zmq.Socket, timeout_ms: int) -> bool:
        """Until ``sock`` has a message, the bell rings, or ``timeout_ms``; clears the bell. True if ``sock`` is
        readable. One thread only (the socket's)."""
        if self._sock is not sock:
            self._poller = zmq.Poller()
            self._poller.register(sock, zmq.POLLIN)
            self._poller.register(self._read, zmq.POLLIN)
            self._sock = sock
        ready = dict(self._poller.poll(max(0, timeout_ms)))
        if self._read in ready:
            try:
                os.read(self._read, 4096)
            except BlockingIOError:
                pass
        return sock in ready

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._poller = zmq.Poller()
            self._sock = None
            os.close(self._read)
            if self._write != self._read:
                os.close(self._write)
