"""Open-file limits for processes that hold one connection per worker (the controller), and for every process
that must keep writing while strangers hold connections open to its sockets (a flood of idle connections).

    raise_open_files(10_000 + FD_MARGIN, "the controller of 10,000 workers")   # soft limit up to the hard one
    raise_to_hard()                        # every worker and launcher at start: the soft limit up to the hard one

How many are free now, and waiting for them when a flood of idle connections took them, is
``srljax.storage.descriptors`` (a checkpoint save waits for them rather than failing its worker).

Every worker keeps one TCP connection to the controller's ROUTER, so the controller's process
holds one file descriptor per worker besides its own few (sockets' mailboxes, the ZAP handler,
log files). Linux often starts processes with a soft ``ulimit -n`` of 1,024 and a far higher hard
limit; an unprivileged process may raise its soft limit up to the hard one, which is what this
does. Past the hard limit libzmq cannot accept more connections and the missing workers would
look lost, so that is refused up front with the fix.
"""

from __future__ import annotations

import resource

FD_MARGIN = 256  # the process's own descriptors besides one per worker


def raise_open_files(needed: int, who: str) -> int:
    """Make the soft ``RLIMIT_NOFILE`` at least ``needed`` (never lower it); return it. ``OSError``
    naming ``who`` and the fix when the hard limit is below ``needed``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise OSError(f"{who} needs {needed:,} open files (one per worker connection) but the hard limit "
                      f"(`ulimit -Hn`) is {hard:,}: raise it (e.g. `nofile` in /etc/security/limits.conf, "
                      f"or LimitNOFILE for a systemd service) or run fewer workers per controller")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def raise_to_hard() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (a common cluster default is 1,024 soft, far more hard);
    return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft
    return hard

