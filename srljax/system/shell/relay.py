"""A node's relay: one connection to the controller carries every control message of that node's workers.

    python -m srljax.system.shell.relay RUN_DIR --bind tcp://10.1.2.7:7700 [--node NAME]   # on the node
    SRLJAX_CONTROL_ADDRESS=tcp://10.1.2.7:7700 python -m srljax.system.shell.run RUN_DIR ROLE I   # its workers

    relay = Relay(cfg, "node3", controller_address, keys=keys, bind="tcp://127.0.0.1:*")   # in code
    while not done:
        relay.step(100)
    relay.close()

Why: with one connection per worker the controller reads N heartbeats a second and holds N
connections (and N CURVE handshakes at start-up); at 100,000 workers that is more than one core
(``bench/control_plane.py``). Behind relays it holds one connection per node and reads one batch
per node every ``FLUSH_S``.

Downward the relay binds a ROUTER that looks, to a worker, exactly like the controller's: it serves
with the controller's CURVE key (workers pin it), its ZAP handler admits only the trial's keys and the
same sender check applies (a message naming worker actor/3 must come from the actor key), so a worker
needs nothing but the address: ``Worker.run`` connects to ``$SRLJAX_CONTROL_ADDRESS`` when it is set,
instead of the controller's address from the name service. Upward it holds one DEALER to the
controller with the ``relay`` key (``srljax/system/shell/auth.py``) and sends the workers' messages in
``relay`` batches (``srljax/comm/control.py``). A heartbeat that says nothing new (the worker is in the
state of its last full heartbeat or a later status, one of ``QUIET_STATES``, with the same ``waiting``, a loop younger than
half ``layout.hang_seconds``,
the last full one under ``FULL_EVERY_S`` old, and it is no trainer, whose progress the controller
follows) goes as the worker's name and incarnation alone (the batch's ``alive``), which costs the
controller a fraction of a full one; any other goes whole. A heartbeat waits at most ``FLUSH_S`` for company,
anything else (register, status, done, names) leaves at the end of the step that read it, and a
batch never passes ``BATCH_BYTES`` (half the controller's frame limit). Commands come back one per
worker, or one per node for many workers (``ControlServer.send_many``), which the relay passes to
each worker it has heard from. Until the controller's connection is up (or while it is full) batches
wait in order; past ``MAX_WAITING`` batches only those holding more than heartbeats are kept (as a
worker drops a heartbeat it cannot send). A command for a worker the relay never heard from is
counted (``undelivered``); the controller finds that worker silent, as without a relay.

The relay ends on SIGTERM / SIGINT, or once the trial's ``RUN_DIR/status.json`` is written (the
controller's last act). ``bench/control_plane.py`` runs the same class for 100,000 simulated workers
(``bench/relay_nodes.py``); ``tests/test_relay.py`` runs it between a real controller and real workers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from srljax.comm import ControlClient, ControlMessage, ControlServer, DirectoryNames, worker_key
from srljax.comm.control import RELAY, TO_RELAY, TO_WORKER, WORKER_KINDS, pack_entry, relay_frame, worker_role
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import CONTROLLER, TRAINER
from srljax.system.shell.auth import worker_context
from srljax.system.shell.bounds import CONTROLLER_IN
from srljax.system.shell.common import bind_host, trial_name
from srljax.system.shell.fd_limits import FD_MARGIN

FLUSH_S = 0.2  # a batch of heartbeats alone leaves at most this long after its first one came (liveness
# allows seconds; 100 relays flushing every 50 ms cost the controller 2,000 wake-ups a second)
BATCH_BYTES = CONTROLLER_IN // 2  # a batch's packed messages at most (the controller refuses frames past CONTROLLER_IN)
FULL_EVERY_S = 30.0  # a worker's heartbeat goes whole at least this often (else, if nothing changed, its name alone)
QUIET_STATES = ("created", "configuring", "ready", "running", "paused")  # beats in others (stopping, ...) go whole
MAX_WAITING = 256  # batches kept while the controller cannot take them; past this, heartbeat-only ones go
POLL_LIMIT = 2000  # workers' messages read per step at most, so commands and flushes keep their turn
LOOKUP_TIMEOUT_S = 120.0  # how long the relay process waits for the controller's address


class Relay:
    """One node's relay (see the module doc). One thread only. ``down`` is None when the caller feeds
    the workers' messages itself (``forward``) and receives their commands (``deliver``, overridden):
    the bench's simulated workers."""

    def __init__(self, cfg: Experiment, node: str, controller_address: str, *, keys: KeyRing | None = None,
                 bind: str | None = None, expected_workers: int = 0, up_ctx: zmq.Context | None = None) -> None:
        self.cfg, self.node = cfg, node
        self.key = worker_key(cfg.name, cfg.trial, RELAY, node)
        trial = trial_name(cfg)
        # its own context with the relay's key, unless the caller shares one among several relays (the bench)
        self.up_ctx = worker_context(cfg, keys, RELAY) if up_ctx is None else None
        self.up = ControlClient(controller_address, trial, self.key, ctx=up_ctx or self.up_ctx, kinds=TO_RELAY)
        self.down_ctx: zmq.Context | None = None
        self.down: ControlServer | None = None
        self.address = ""
        if bind is not None:
            self.down_ctx = worker_context(cfg, keys, CONTROLLER)  # workers pin the controller's key
            self.down = ControlServer(bind, trial, ctx=self.down_ctx, kinds=WORKER_KINDS,
                                      backlog=expected_workers + FD_MARGIN)
            self.address = self.down.address
        self.batch: list[bytes] = []  # packed messages (``pack_entry``)
        self.alive: list[str] = []  # [worker, incarnation, ...]: heartbeats that said nothing new
        self._told: dict[str, tuple[Any, ...]] = {}  # worker -> its last whole heartbeat's state, waiting, when,
        # incarnation, and whether a beat repeating them may go as its name (``_telling``)
        self._young = cfg.layout.hang_seconds / 2  # a loop age past this goes whole, every second
        self.batch_bytes = 0
        self.batch_must = False  # it holds more than heartbeats: it leaves at the end of this step
        self.oldest = 0.0  # when the batch's first message came
        self.waiting: deque[tuple[list[bytes], list[str], bool]] = deque()  # sealed batches the controller has not taken
        self.counts: Counter[str] = Counter()
        self.poller = zmq.Poller()
        self.poller.register(self.up.sock, zmq.POLLIN)
        if self.down is not None:
            self.poller.register(self.down.sock, zmq.POLLIN)

    # -- up: workers -> controller -----------------------------------------------------------------
    def forward(self, msg: ControlMessage) -> None:
        """Queue one worker message for the controller (it leaves in ``flush``)."""
        worker, p = msg.worker, msg.payload
        if msg.kind == "heartbeat":  # the hot path: a beat that says nothing new
            told, incarnation, now = self._told.get(worker), p.get("incarnation"), time.monotonic()
            if told is not None and told[4] and p.get("state") == told[0] and told[3] == incarnation and \
                    p.get("waiting") == told[1] and now - told[2] < FULL_EVERY_S:
                age = p.get("loop_age_s")
                if (type(age) is float or type(age) is int) and age < self._young:
                    if self.batch_bytes > BATCH_BYTES * 0.9:
                        self._seal()
                    if not (self.batch or self.alive):
                        self.oldest = now
                    self.alive += (worker, incarnation)
                    self.batch_bytes += len(worker) + len(incarnation) + 4
                    return
            self._told[worker] = self._telling(worker, p.get("state"), p.get("waiting"), now, incarnation)
        elif msg.kind == "status" and (told := self._told.get(worker)) is not None and \
                isinstance(p.get("state"), str) and p.get("incarnation") == told[3]:
            # the controller takes the state from the status too: a heartbeat saying the same is nothing new
            self._told[worker] = self._telling(worker, p["state"], told[1], told[2], told[3])
        self.forward_packed(pack_entry(msg.worker, msg.kind, msg.payload), msg.kind != "heartbeat")

    @staticmethod
    def _telling(worker: str, state: Any, waiting: Any, when: float, incarnation: Any) -> tuple[Any, ...]:
        """What the controller last heard of ``worker``, and whether a beat repeating it may go as its name."""
        quiet = state in QUIET_STATES and isinstance(incarnation, str) and worker_role(worker) != TRAINER
        return state, waiting, when, incarnation, quiet

    def _start_batch(self) -> None:
        if self.batch_bytes > BATCH_BYTES * 0.9:
            self._seal()
        if not (self.batch or self.alive):
            self.oldest = time.monotonic()

    def forward_packed(self, entry: bytes, must: bool) -> None:
        """``forward`` of a message packed by ``pack_entry``; ``must``: more than a heartbeat (it leaves this step)."""
        if (self.batch or self.alive) and self.batch_bytes + len(entry) > BATCH_BYTES:
            self._seal()
        self._start_batch()
        self.batch.append(entry)
        self.batch_bytes += len(entry)
        self.batch_must = self.batch_must or must
        self.counts["forwarded"] += 1

    def _seal(self) -> None:
        self.counts["alive"] += len(self.alive) // 2
        self.waiting.append((self.batch, self.alive, self.batch_must))
        self.batch, self.alive, self.batch_bytes, self.batch_must = [], [], 0, False

    def flush(self, force: bool = False) -> None:
        """Seal the batch if it is due (more than heartbeats, ``FLUSH_S`` old, or ``force``) and send
        what waits, in order, as far as the controller's connection takes it now."""
        if (self.batch or self.alive) and (force or self.batch_must or time.monotonic() - self.oldest >= FLUSH_S):
            self._seal()
        while self.waiting:
            entries, alive, _ = self.waiting[0]
            if not self.up.send_frame(relay_frame(self.up.trial, self.key, entries, alive), timeout_ms=0):
                break
            self.waiting.popleft()
            self.counts["batches"] += 1
        if len(self.waiting) > MAX_WAITING:
            kept = deque(b for b in self.waiting if b[2])
            self.counts["heartbeats_dropped"] += sum(len(e) + len(a) // 2 for e, a, must in self.waiting if not must)
            self.waiting = kept

    # -- down: controller -> workers -----------------------------------------------------------------
    def command(self, msg: ControlMessage) -> None:
        """A message from the controller: one worker's command, several workers' commands, or a fan-out."""
        if msg.kind != RELAY:
            self.deliver(msg.worker, msg.kind, msg.payload)
            return
        if isinstance(messages := msg.payload.get("messages"), list):
            for entry in messages:
                if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and \
                        entry[1] in TO_WORKER and isinstance(entry[2], dict):
                    self.deliver(*entry)
                else:
                    self.counts["bad_command"] += 1
            return
        workers, kind, payload = (msg.payload.get(k) for k in ("workers", "kind", "payload"))
        if not (isinstance(workers, list) and kind in TO_WORKER and isinstance(payload, dict)):
            self.counts["bad_fan_out"] += 1
            return
        for worker in workers:
            if isinstance(worker, str):
                self.deliver(worker, kind, payload)

    def deliver(self, worker: str, kind: str, payload: dict[str, Any]) -> None:
        """Pass a command to one of this node's workers."""
        if self.down is None or not self.down.send(worker, kind, payload, timeout_ms=0):
            self.counts["undelivered"] += 1

    # -- the loop ----------------------------------------------------------------------------------
    def step(self, timeout_ms: int = 100) -> None:
        """Wait up to ``timeout_ms`` (less while a batch is due) for traffic; move what came; flush."""
        if self.batch or self.alive or self.waiting:
            due = 0.0 if self.waiting else self.oldest + FLUSH_S - time.monotonic()
            timeout_ms = min(timeout_ms, max(0, int(due * 1000) + 1), 20 if self.waiting else timeout_ms)
        self.poller.poll(timeout_ms)
        if self.down is not None:
            for msg in self.down.poll(timeout_ms=0, limit=POLL_LIMIT):
                self.forward(msg)
        self.read_commands()
        self.flush()

    def read_commands(self) -> None:
        while (msg := self.up.recv(timeout_ms=0)) is not None:
            self.command(msg)

    def run(self, until: Callable[[], bool], timeout_ms: int = 100) -> None:
        while not until():
            self.step(timeout_ms)
        self.flush(force=True)

    def counters(self) -> dict[str, int]:
        out = {**self.counts, **{f"up.{k}": v for k, v in self.up.counters().items()}}
        if self.down is not None:
            out.update({f"down.{k}": v for k, v in self.down.counters().items()})
        return out

    def close(self) -> None:
        self.up.close()
        if self.down is not None:
            self.down.close()
        for ctx in (self.up_ctx, self.down_ctx):
            if ctx is not None:
                ctx.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srljax.system.shell.relay", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--bind", default="", help="where the node's workers connect (default: tcp://<bind host>:*, "
                                                   "printed); give them the same in $SRLJAX_CONTROL_ADDRESS")
    parser.add_argument("--node", default="", help="this node's name (default: $SLURMD_NODENAME, else the host name)")
    parser.add_argument("--workers", type=int, default=0, help="about how many workers will connect (listen backlog)")
    args = parser.parse_args(argv)
    from srljax.config import from_dict
    from srljax.system.shell import auth

    run_dir = Path(args.run_dir)
    if not (run_dir / "config.json").exists():
        parser.error(f"{run_dir / 'config.json'} not found: give the trial's run folder (the launcher writes it)")
    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    node = args.node or os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    keys = auth.load(cfg, run_dir, slurm=bool(os.environ.get("SLURM_JOB_ID")))
    names = DirectoryNames(run_dir / "names")
    controller = names.wait(worker_key(cfg.name, cfg.trial, CONTROLLER, 0), timeout=LOOKUP_TIMEOUT_S)
    began = time.time()
    relay = Relay(cfg, node, controller, keys=keys, bind=args.bind or f"tcp://{bind_host()}:*",
                  expected_workers=args.workers)
    names.add(f"{relay.key}/control", relay.address)  # for tools; workers get it in $SRLJAX_CONTROL_ADDRESS
    print(f"[relay {node}] serving this node's workers at {relay.address} for the controller at {controller}",
          flush=True)
    stop: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.append(signum))
    status = run_dir / "status.json"
    next_look, ended = 0.0, False

    def done() -> bool:
        nonlocal next_look, ended
        if stop:
            return True
        if time.monotonic() >= next_look:  # the controller writes status.json as the trial ends
            next_look = time.monotonic() + 1.0
            ended = status.exists() and status.stat().st_mtime >= began
        return ended

    try:
        relay.run(done)
    finally:
        print(f"[relay {node}] ended: {relay.counters()}", flush=True)
        relay.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
