"""A trial's CURVE keys and each worker's zmq context: who holds which key, where they live, how they arrive.

    cfg = resolved(cfg, slurm=False)             # layout.auth "auto" -> "on" / "off" (in config.json)
    keys = prepare(cfg, run_dir)                 # launcher: a key pair per identity, RUN_DIR/keys/ (0700, 0600)
    keys = load(cfg, run_dir)                    # worker process / Slurm controller: read them back
    ctx = worker_context(cfg, keys, "actor")     # every socket of the worker made from it follows the rules

Identities are the controller, every role of the layout (custom roles included) and ``relay`` (a
node's relay, which speaks to the controller for its node's workers). A worker
uses its role's key pair both to serve and to connect; the ZAP handler of every context admits
only the trial's public keys, so a process of another trial (other keys) or without the keys
cannot connect to any socket. Clients pin the server's public key: control -> the controller's,
params -> the trainer's, samples/inference -> the role the configure message says serves that
address. How keys reach workers: threads keep them in memory (``run_threads``); local processes
and Slurm tasks read ``RUN_DIR/keys/`` (the run folder is on a filesystem every node sees, passed
as ``python -m srljax.system.shell.run RUN_DIR ROLE I``), written by the launcher before any worker starts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from srljax.comm.control import RELAY
from srljax.comm.security import KeyRing, WireContext, WireRules
from srljax.config import Experiment
from srljax.config.psro import last_params_version
from srljax.layout import CONTROLLER, PARAMS, TRAINER, build_layout
from srljax.system.shell.bounds import control_limits

KEYS_DIR = "keys"
CONTROL = "control"  # the control stream's name on the wire (ZAP domain); no layout stream


def auth_on(cfg: Experiment, *, slurm: bool) -> bool:
    """``layout.auth``: on, off, or auto (on: every backend, loopback included, since any local process can
    reach a loopback port; ``slurm`` is kept for callers that tell backends apart)."""
    return cfg.layout.auth != "off"


def resolved(cfg: Experiment, *, slurm: bool) -> Experiment:
    """``cfg`` with ``layout.auth`` decided, so every worker reading ``config.json`` agrees."""
    value = "on" if auth_on(cfg, slurm=slurm) else "off"
    return dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, auth=value))


def identities(cfg: Experiment) -> list[str]:
    """The controller, every role of the layout, and the nodes' relays (``srljax/system/shell/relay.py``)."""
    return [CONTROLLER, *dict.fromkeys(role for role, _ in build_layout(cfg).workers()), RELAY]


def prepare(cfg: Experiment, run_dir: str | Path | None = None) -> KeyRing | None:
    """Fresh keys for a trial with auth on (None when off); written to ``RUN_DIR/keys`` if ``run_dir`` is given."""
    if cfg.layout.auth != "on":
        return None
    keys = KeyRing.generate(identities(cfg))
    if run_dir is not None:
        keys.write(Path(run_dir) / KEYS_DIR)
    return keys


def load(cfg: Experiment, run_dir: str | Path, *, slurm: bool = False) -> KeyRing | None:
    """The keys the launcher wrote (None when auth is off); ``AuthError`` names what is missing."""
    if not auth_on(cfg, slurm=slurm):
        return None
    return KeyRing.load(Path(run_dir) / KEYS_DIR)


def worker_context(cfg: Experiment, keys: KeyRing | None, identity: str) -> WireContext:
    """The context one worker (or the controller) makes all its sockets from."""
    rules = WireRules(keys=keys, identity=identity, pinned={CONTROL: CONTROLLER, PARAMS: TRAINER},
                      limits=control_limits(cfg), max_params_version=last_params_version(cfg),
                      max_message_bytes=cfg.layout.max_message_bytes)
    return WireContext(rules)
