"""srljax/comm/doorbell.py: a wait on a socket that another thread's ring ends at once."""

from __future__ import annotations

import threading
import time

import zmq

from srljax.comm.doorbell import Doorbell


def test_a_ring_or_a_message_ends_the_wait_and_nothing_else_does():
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind("inproc://bell")
    push.connect("inproc://bell")
    bell = Doorbell()
    try:
        start = time.monotonic()
        assert bell.wait(pull, 150) is False and time.monotonic() - start >= 0.14  # nothing: the whole timeout

        threading.Timer(0.05, bell.ring).start()  # another thread rings: the wait ends long before its 10 s
        start = time.monotonic()
        assert bell.wait(pull, 10_000) is False and time.monotonic() - start < 2.0
        assert bell.wait(pull, 0) is False  # the ring was cleared by the wait it ended

        bell.ring()
        bell.ring()  # rings before a wait are not lost, and count once
        assert bell.wait(pull, 10_000) is False and bell.wait(pull, 0) is False

        push.send(b"x")
        assert bell.wait(pull, 10_000) is True and pull.recv() == b"x"
    finally:
        bell.close()
        bell.ring()  # after close: a no-op, not a write to a reused descriptor
        push.close(0)
        pull.close(0)
        ctx.term()
