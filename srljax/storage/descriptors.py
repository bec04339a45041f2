"""File descriptors left to this process, for writes that must not fail while strangers hold connections open.

    free_files()                           # descriptors left under the soft limit (Linux: /proc/self/fd)
    wait_for_files(64, 60.0)               # True once 64 are free (a flood's idle connections time out), else False
    short_of_files(err)                    # an OSError (or its causes) says EMFILE / ENFILE

A flood of idle connections takes one descriptor each until libzmq drops it (``ZMQ_HANDSHAKE_IVL`` on the data
streams' servers, ``srljax.comm.sockets.SERVER_HANDSHAKE_S``); meanwhile an ``open`` fails with EMFILE. A checkpoint
save that meets that waits for descriptors and tries again (``srljax.storage.checkpoint``) instead of failing
its worker, which would cost a restart for what is the environment's fault. Raising the soft limit is
``srljax.system.shell.fd_limits``.
"""

from __future__ import annotations

import errno
import os
import resource
import time


def open_files() -> int:
    """Descriptors this process holds (0 where ``/proc/self/fd`` does not exist)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself holds
    except OSError as err:  # listing needs a descriptor too: none left means all are taken
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0] if err.errno in (errno.EMFILE, errno.ENFILE) else 0


def free_files() -> int:
    """Descriptors left under the soft limit (a large number where it is unlimited or unknown)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or not os.path.isdir("/proc/self/fd"):
        return 1 << 30
    return soft - open_files()


def short_of_files(err: BaseException | None) -> bool:
    """Whether ``err`` or an exception it came from is EMFILE / ENFILE (too many open files)."""
    seen = 0
    while err is not None and seen < 20:
        if isinstance(err, OSError) and err.errno in (errno.EMFILE, errno.ENFILE):
            return True
        if "Too many open files" in str(err):  # raised by a library that lost the errno (tensorstore)
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def wait_for_files(need: int, timeout_s: float, poll_s: float = 0.2) -> bool:
    """Wait until ``need`` descriptors are free; False if ``timeout_s`` passed first."""
    deadline = time.monotonic() + timeout_s
    while free_files() < need:
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True
