"""The worker shell every role derives from: run loop, control commands, heartbeats, metrics.

    class EchoWorker(Worker):
        role = "echo"
        def setup(self): ...   # bind servers (``self.register``), connect to upstream (``self.lookup``)
        def poll(self): ...    # one short slice of work (return within ~0.1 s)
        def close(self): ...   # release sockets, envs; final checkpoint

    code = EchoWorker(cfg, index=0, names=names).run()   # blocks until the controller says stop

``run`` registers with the controller (found in ``names``), then follows its commands:
``configure`` calls ``setup`` and answers ``status ready``; ``start`` / ``pause`` switch ``poll``
on and off; ``stop`` (or ``request_stop``, e.g. from SIGTERM) ends the loop, calls ``close`` and
answers ``status stopped``. An exception anywhere is sent to the controller as ``status error``
with its traceback and makes ``run`` return 1.

A control thread owns the control socket: it heartbeats every second even while the main thread
is busy in a long jit compile or update, and carries commands in and messages out through queues.
Metrics (``self.stats`` plus ``metrics()``) go to ``runs/<exp>/<trial>/workers/<role>-<i>.jsonl``
every few seconds, each line stamped with pid and role.
"""

from __future__ import annotations

import json
import math
import os
import queue
import socket
import threading
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

import zmq

from srljax.comm import ControlClient, ControlMessage, NameResolver, worker_key
from srljax.config import Experiment
from srljax.system.common import CONTROLLER, stream_key, trial_name
from srljax.system.stats import WorkerStats

HEARTBEAT_S = 1.0
METRICS_EVERY_S = 2.0
LOOKUP_TIMEOUT_S = 120.0  # servers are configured before clients, so this is only a safety net


class Worker:
    role: ClassVar[str] = "worker"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None):
        self.cfg, self.index, self.names, self.ctx = cfg, index, names, ctx
        self.trial = trial_name(cfg)
        self.key = worker_key(cfg.name, cfg.trial, self.role, index)
        self.name = f"{self.role}/{index}"
        self.stats = WorkerStats()
        self.state = "created"
        self._parent_pid = parent_pid  # processes: stop when the launcher is gone
        self._stop = threading.Event()
        self._stop_reason = ""
        self._inbox: queue.Queue[ControlMessage] = queue.Queue()
        self._outbox: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._control_done = threading.Event()
        self._last_progress = time.monotonic()
        self._metrics_file: Any = None
        self._next_flush = 0.0

    # -- subclass hooks -------------------------------------------------------------------
    def setup(self) -> None:
        """Bind server sockets and ``register`` them, then connect to upstream servers."""

    def poll(self) -> None:
        """One short slice of work."""

    def close(self) -> None:
        """Release everything ``setup`` made; must tolerate a partial ``setup``."""

    def metrics(self) -> dict[str, Any]:
        """Role-specific numbers for the worker's metrics line (endpoint counters, queue depths)."""
        return {}

    # -- helpers for subclasses ------------------------------------------------------------
    def log(self, text: str) -> None:
        print(f"[{self.name} pid={os.getpid()}] {text}", flush=True)

    def register(self, stream: str, address: str) -> None:
        """Publish where this worker's ``stream`` socket can be reached."""
        self.names.add(stream_key(self.cfg, self.role, self.index, stream), address)

    def lookup(self, role: str, index: int, stream: str, timeout: float = LOOKUP_TIMEOUT_S) -> str:
        return self.names.wait(stream_key(self.cfg, role, index, stream), timeout=timeout)

    def tell_controller(self, kind: str, payload: dict[str, Any] | None = None) -> None:
        """Queue a message for the controller (``done``, ``status``); the control thread sends it."""
        self._outbox.put((kind, dict(payload or {})))

    def request_stop(self, reason: str = "") -> None:
        """Thread- and signal-safe: finish the current poll, close, exit ``run``."""
        self._stop_reason = self._stop_reason or reason
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the loop ----------------------------------------------------------------------------
    def run(self, controller_timeout: float = LOOKUP_TIMEOUT_S) -> int:
        """Serve the controller until ``stop``; 0 on a clean stop, 1 after an error."""
        address = self.names.wait(worker_key(self.cfg.name, self.cfg.trial, CONTROLLER, 0), timeout=controller_timeout)
        control = threading.Thread(target=self._control_loop, args=(address,), name=f"{self.name}-control", daemon=True)
        control.start()
        self.log(f"started; controller at {address}")
        code = 0
        try:
            while not self._stop.is_set():
                self._handle_commands(wait_s=0.0 if self.state == "running" else 0.05)
                if self.state == "running" and not self._stop.is_set():
                    self.poll()
                    self._last_progress = time.monotonic()
                self._flush_metrics()
        except Exception:
            code = 1
            self._report_error("run", traceback.format_exc())
        finally:
            try:
                self.close()
            except Exception:
                code = 1
                self._report_error("close", traceback.format_exc())
            if code == 0:
                self.state = "stopped"
            self._flush_metrics(force=True)
            if self._metrics_file is not None:
                self._metrics_file.close()
            if code == 0:
                self.tell_controller("status", {"state": "stopped"})
            self.log(f"{self.state}" + (f" ({self._stop_reason})" if self._stop_reason else ""))
            self._control_done.set()
            control.join(timeout=5.0)
        return code

    def _report_error(self, where: str, text: str) -> None:
        self.state = "error"
        self.log(f"error in {where}:\n{text}")
        self.tell_controller("status", {"state": "error", "error": text[-4000:]})

    def _handle_commands(self, wait_s: float) -> None:
        try:
            msg = self._inbox.get(timeout=wait_s) if wait_s > 0 else self._inbox.get_nowait()
        except queue.Empty:
            return
        while msg is not None:
            self._command(msg)
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                msg = None

    def _command(self, msg: ControlMessage) -> None:
        if msg.kind == "configure" and self.state == "created":
            self.state = "configuring"
            self.setup()
            self.state = "ready"
        elif msg.kind == "start" and self.state in ("ready", "paused"):
            self.state = "running"
        elif msg.kind == "pause" and self.state == "running":
            self.state = "paused"
        elif msg.kind == "stop":
            self.request_stop("stop command")
            return
        self.tell_controller("status", {"state": self.state})

    # -- control thread ---------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "role": self.role, "index": self.index, "host": socket.gethostname()}

    def _control_loop(self, address: str) -> None:
        client = ControlClient(address, self.trial, self.key, ctx=self.ctx)
        try:
            client.send("register", self._identity())
            next_beat, last_beat, beats = 0.0, time.monotonic(), 0
            while True:
                while True:
                    try:
                        kind, payload = self._outbox.get_nowait()
                    except queue.Empty:
                        break
                    client.send(kind, payload, timeout_ms=1000)
                if self._control_done.is_set():
                    break
                now = time.monotonic()
                if now >= next_beat:
                    next_beat, beats = now + HEARTBEAT_S, beats + 1
                    # gap_s: how late this beat is; loop_age_s: since the main loop last finished a poll
                    client.send("heartbeat", {"state": self.state, "seq": beats, "gap_s": round(now - last_beat, 3),
                                              "loop_age_s": round(now - self._last_progress, 3)}, timeout_ms=1000)
                    last_beat = now
                msg = client.recv(timeout_ms=20)
                if msg is not None:
                    self._inbox.put(msg)
                if self._parent_pid is not None and os.getppid() != self._parent_pid:
                    self.request_stop("launcher exited")
        finally:
            client.close()

    # -- metrics -------------------------------------------------------------------------------
    def _flush_metrics(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_flush:
            return
        self._next_flush = now + METRICS_EVERY_S
        if self._metrics_file is None:
            path = Path(self.cfg.run_dir) / "workers" / f"{self.role}-{self.index}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._metrics_file = path.open("a")
        record = {"time": round(time.time(), 3), "pid": os.getpid(), "role": self.role, "index": self.index,
                  "state": self.state, **self.stats.snapshot(), **self.metrics()}
        self._metrics_file.write(json.dumps({k: _plain_tree(v) for k, v in record.items()}) + "\n")
        self._metrics_file.flush()


def _plain_tree(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN/inf to strings (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _plain_tree(v) for k, v in value.items()}
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
