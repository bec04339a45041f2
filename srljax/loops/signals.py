"""Stops that wait for a consistent point.

A training loop's update, its metrics line and its checkpoint belong together: a checkpoint of
update N exists only after N's line, so ``--resume`` (which cuts ``metrics.jsonl`` back to the
checkpoint) continues with N+1 and the file has every update once. ``held()`` wraps that section:
SIGINT (Ctrl-C) or SIGTERM (a scheduler's stop) arriving inside it is delivered when it ends, to
whatever handler was in place before (``launch.local``'s, Python's default ``KeyboardInterrupt``,
or the default termination).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in HELD}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        if caught:  # once, to the handler that was in place: it raises or ends the process as it would have
            signal.raise_signal(caught[0])
