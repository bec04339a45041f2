"""Which address this node's listening sockets bind (workers, the controller, Prometheus endpoints)."""

from __future__ import annotations

import os

BIND_HOST_ENV = "SRLJAX_BIND_HOST"
"""set by multi-node backends (``launch/slurm/task.py``) to the node's cluster address."""


def bind_host() -> str:
    """This node's address for listening sockets: ``$SRLJAX_BIND_HOST`` on multi-node backends, else loopback."""
    return os.environ.get(BIND_HOST_ENV) or "127.0.0.1"
