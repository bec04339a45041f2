"""Where a Slurm task is: its node's cluster address (the role's environment is ``launch.worker_env``).

    addr = node_address()            # "10.1.2.7": $SRLJAX_NODE_ADDR, else Slurm's NodeAddr, else DNS

Standard library only: the task wrappers call this before anything imports JAX, which reads
``JAX_PLATFORMS`` and ``XLA_FLAGS`` when it starts.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Mapping

TIME_LIMIT_EXIT_CODE = 3
"""Slurm's time-limit warning ended the trial before ``total_env_steps``: a failure, told apart from
a worker's (1) so a script can resubmit rather than debug."""
CANCELLED_EXIT_CODE = 4
"""SIGTERM reached the controller from Slurm (``scancel``, preemption without requeue, a node going down),
not from ``launch.slurm stop`` (SIGINT): the trial did not finish, so the job must not read COMPLETED."""

NODE_ADDR_ENV = "SRLJAX_NODE_ADDR"
SCONTROL_TIMEOUT_S = 20.0


def node_address(environ: Mapping[str, str] | None = None) -> str:
    """The address peers on other nodes reach this one at.

    ``$SRLJAX_NODE_ADDR`` if set (several networks: pick the fast one); else the ``NodeAddr`` Slurm
    itself uses for ``$SLURMD_NODENAME`` (``scontrol show node``); else what the node name or host
    name resolves to. Virtual nodes of a test cluster all answer 127.0.0.1.
    """
    env = os.environ if environ is None else environ
    if env.get(NODE_ADDR_ENV):
        return env[NODE_ADDR_ENV]
    node = env.get("SLURMD_NODENAME", "")
    if node:
        addr = _scontrol_node_addr(node)
        if addr:
            return _resolve(addr) or addr
    for name in (node, socket.gethostname()):
        if name and (addr := _resolve(name)):
            return addr
    raise RuntimeError(f"cannot find this node's address (node {node!r}, host {socket.gethostname()!r}); "
                       f"set {NODE_ADDR_ENV} in slurm.setup, e.g. export {NODE_ADDR_ENV}=$(hostname -i)")


def _scontrol_node_addr(node: str) -> str:
    try:
        out = subprocess.run(["scontrol", "show", "node", node], check=False, capture_output=True, text=True,
                             timeout=SCONTROL_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = re.search(r"\bNodeAddr=(\S+)", out)
    return found.group(1) if found else ""


def _resolve(name: str) -> str:
    try:
        return socket.gethostbyname(name)
    except OSError:
        return ""
