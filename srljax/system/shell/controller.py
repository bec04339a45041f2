"""Controller: registers every worker of a layout, configures and starts them, watches, ends the trial.

    controller = Controller(cfg, names, exited=backend.exited, log_tail=backend.tail,
                            start=backend.start, kill=backend.kill)   # launch/backend.py does this
    result = controller.run()          # TrialResult(exit_code, reason, message); also RUN_DIR/status.json

One controller per trial, whatever the backend: it binds a ControlServer, reads the env spec once, waits for
every worker of ``build_layout(cfg)`` to ``register``, sends ``configure`` role by role (servers before their
clients, with the env spec, extras spec and ``peers``, so no worker rebuilds the layout) and ``start``, then
watches: a worker that errs, exits, stops heartbeating or hangs is lost and restarted
(``srljax/system/shell/restarts.py``; a trainer with its whole group, resuming from its newest checkpoint).
The trial ends ``done`` (0), or ``error``, ``lost``, ``stalled`` or ``timeout`` (1) with a message naming the
worker and what it waited on; ``stop`` goes to clients first, trainers last. Control messages travel only on
the ROUTER/DEALER control channel, never on PUB. The lifecycle in full: ``docs/architecture.md``, "Control".
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from srljax.comm import ControlMessage, ControlServer, NameResolver, worker_key
from srljax.comm.security import KeyRing, WireContext
from srljax.config import Experiment
from srljax.config.psro import last_params_version
from srljax.layout import CONTROLLER, TRAINER, Layout, plan_of
from srljax.storage import run_dir as run_folder
from srljax.storage.steps import read_meta
from srljax.system.shell.auth import worker_context
from srljax.system.shell.common import bind_address, env_spec, spec_to_wire, trial_name
from srljax.system.shell.fd_limits import FD_MARGIN, raise_open_files, raise_to_hard
from srljax.system.shell.names_service import answer_names, served_store
from srljax.system.shell.restarts import Pending, Restarts
from srljax.telemetry.exporter import serve_controller, write_trial_targets
from srljax.telemetry.progress import PROGRESS_EVERY_S, last_json_line, progress_line
from srljax.types import EnvSpec

REGISTER_TIMEOUT_S = 300.0  # imports and jax start-up of many processes on few cores
CONFIGURE_TIMEOUT_S = 600.0  # envpool (Atari ROM load), network init, the trainer's first compile
STARTUP_SILENCE_S = 30.0  # heartbeat silence allowed before the trial starts
PRE_START_STATES = ("created", "configuring", "ready")  # a worker in these heartbeats every 5 s, not every 1 s
STOP_GRACE_S = 30.0  # the trainer writes its final checkpoint while stopping
TIER_WAIT_S = 5.0  # stop_all: how long one role's clients may take to stop before its servers are told
SUCCESS_REASONS = ("done", "stopped")
# Work over every worker (who is missing, who is silent or hung, has the backend seen an exit) runs
# this often, not once per message: at 10,000 workers a tick comes with every few heartbeats.
LIVENESS_EVERY_S = 0.2
LOOK_EVERY_S = 0.05  # how often waiting for a group (register, configure, stop) looks who is missing
LOOK_SHARE = 0.1  # ... at most: a look over 100,000 missing takes tens of ms, so it waits 1 / LOOK_SHARE times that
POLL_BATCH = 1000  # messages taken per tick at most, so a flood of heartbeats cannot hold off the checks
NAMES_SHOWN = 50  # "all N workers registered": names and pids of at most this many


@dataclass(frozen=True)
class TrialResult:
    exit_code: int  # 0: done (or stopped by the user); 1: failed, lost, stalled, timed out; 130: interrupted
    reason: str  # done | stopped | timeout | time_limit | lost | error | stalled | startup | interrupted
    message: str


DISK_FAULTS = {"No space left on device": "the disk is full: free space there, then continue with --resume",
               "Disk quota exceeded": "the disk quota is used up: free space, then continue with --resume",
               "Read-only file system": "the run folder's disk is read-only: fix that, then continue with --resume"}


DISK_FULL_BYTES = 1 << 20  # a run folder's disk with less free is full: a lost worker's successor would die on it


def environment_fault(error: str, run_dir: str | Path | None = None) -> str | None:
    """What is wrong with the machine (not the worker) in a worker's error, or on the run folder's disk, with the
    fix; None if nothing is. Such a worker is not restarted: its successor would meet the same disk, and the
    restarts would be spent. The disk is looked at too: a worker that died writing its own error to a full disk
    leaves only an exit code."""
    if fix := next((fix for text, fix in DISK_FAULTS.items() if text in error), None):
        return fix
    try:
        fs = os.statvfs(run_dir) if run_dir is not None else None
    except OSError:
        return None
    if fs is not None and fs.f_bavail * fs.f_frsize < DISK_FULL_BYTES:
        return f"the disk under {run_dir} is full ({fs.f_bavail * fs.f_frsize >> 10} KiB free): free space there, " \
               "then continue with --resume"
    return None


class TrialEnded(Exception):
    def __init__(self, result: TrialResult):
        super().__init__(result.message)
        self.result = result


def write_status(run_dir: str | Path, result: TrialResult, restarts: dict[str, Any] | None = None) -> Path:
    """``RUN_DIR/status.json``: how the trial ended and, if given, its worker restarts (written atomically)."""
    path = Path(run_dir) / "status.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".status.{os.getpid()}.tmp")
    record = {"exit_code": result.exit_code, "reason": result.reason, "message": result.message,
              "time": round(time.time(), 3), **({"restarts": restarts} if restarts is not None else {})}
    for attempt in range(2):
        try:
            tmp.write_text(json.dumps(record, indent=2) + "\n")
            os.replace(tmp, path)
            return path
        except OSError as err:  # a full disk: the run folder's reserve (srljax.storage.run_dir) makes the room
            tmp.unlink(missing_ok=True)
            if attempt or err.errno not in (errno.ENOSPC, errno.EDQUOT) or not run_folder.spare_room(run_dir):
                raise
    return path


class Controller:
    def __init__(self, cfg: Experiment, names: NameResolver, layout: Layout | None = None, *,
                 ctx: zmq.Context | None = None, exited: Callable[[], dict[str, int]] | None = None,
                 log_tail: Callable[[str], str] | None = None, verbose: bool = True, spec: EnvSpec | None = None,
                 keys: KeyRing | None = None, start: Callable[[str, int], None] | None = None,
                 kill: Callable[[str], None] | None = None, connections: int | None = None):
        self.cfg, self.names = cfg, names
        self.resume = False  # tell workers to continue the trial from its newest checkpoint (``--resume``)
        self.plan = plan_of(cfg)  # the run's roles and mode, decided once (srljax/layout.py)
        self.layout = layout or self.plan.layout
        # a connection per worker, or per node where nodes' relays carry their workers (srljax/system/shell/relay.py)
        connections = len(self.layout.workers()) if connections is None else connections
        raise_open_files(connections + FD_MARGIN, "the controller")
        raise_to_hard()  # and what the hard limit allows besides: strangers' idle connections take descriptors too
        self.spec = spec or env_spec(cfg)
        # its own context: the controller's key (``keys``; None: layout.auth off) and receive bounds
        self._own_ctx = ctx is None
        self.ctx = worker_context(cfg, keys, CONTROLLER) if ctx is None else ctx
        self.server = ControlServer(bind_address(cfg), trial_name(cfg), ctx=self.ctx,
                                    backlog=connections + FD_MARGIN)  # they all connect at once
        names.add(worker_key(cfg.name, cfg.trial, CONTROLLER, 0), self.server.address)
        self.name_store = served_store(cfg)  # layout.names=controller: the workers' names, kept and served here
        self.expected = {worker_key(cfg.name, cfg.trial, role, i): f"{role}/{i}" for role, i in self.layout.workers()}
        self.roles = {key: name.split("/")[0] for key, name in self.expected.items()}
        self.info: dict[str, dict[str, Any]] = {}  # worker key -> its register payload (pid, role, ...)
        self.states: dict[str, str] = {}
        self.beats: dict[str, dict[str, Any]] = {}  # worker key -> its last heartbeat
        self._hang_suspects: set[str] = set()  # workers whose heartbeat reported a loop older than layout.hang_seconds
        self.ready: dict[str, dict[str, Any]] = {}  # worker key -> its ready status (addresses, extras_spec)
        self.done: dict[str, Any] | None = None
        self._exited = exited or (lambda: {})
        self._log_tail = log_tail or (lambda name: "")
        # the backend's ``start(role, index)`` and ``kill(name)``; without both nothing is restarted
        self._start, self._kill = start, kill
        self.restarts = Restarts(cfg)
        self.pending: dict[str, Pending] = {}  # worker key -> its restart in progress
        self.incarnation: dict[str, str] = {}  # worker key -> the incarnation now serving it (from register)
        self.replaced: dict[str, set[str]] = {}  # worker key -> incarnations lost and replaced: their late messages are ignored
        self._verbose = verbose
        self._lost_timeout = cfg.layout.heartbeat_timeout_seconds
        self._started = False
        self._configured: set[str] = set()  # roles whose ``configure`` went out (start-up goes role by role)
        self._last_tick = time.monotonic()
        self._silence_grace_until = 0.0
        self._trainer_progress = (-1, time.monotonic())  # (updates, when that number last changed)
        self._key_of = {name: key for key, name in self.expected.items()}  # "actor/3" -> its worker key
        self._trainers = [k for k in self.expected if self.roles[k] == TRAINER]
        self._next_liveness = 0.0
        self._next_progress = 0.0  # a progress line in the launcher's console every PROGRESS_EVERY_S
        self._shown_update: Any = None
        self.exporter = serve_controller(self)  # Prometheus; RUN_DIR/prometheus_targets.json lists it and every worker

    def say(self, text: str) -> None:
        if self._verbose:
            print(f"[controller] {text}", flush=True)

    # -- the trial ----------------------------------------------------------------------------------
    def run(self) -> TrialResult:
        """Run the trial to its end; always stops the workers and writes ``status.json`` before returning."""
        try:
            result = self._run()
        except TrialEnded as ended:
            result = ended.result
        except KeyboardInterrupt:
            result = TrialResult(130, "interrupted", "interrupted (Ctrl-C or SIGTERM)")
        if self.restarts.total:
            result = dataclasses.replace(result, message=f"{result.message}\n{self.restarts.describe()}")
        self.say(f"ending the trial: {result.message}")
        self.stop_all()
        if self.cfg.layout.shared_memory:  # rings of senders killed before they could remove them (threads: all)
            from srljax.comm.shm import remove_dead_rings

            remove_dead_rings(trial_name(self.cfg), also_pid=os.getpid())
        try:
            write_status(self.cfg.run_dir, result, self.restarts.summary())
        except OSError as err:  # a full or read-only disk: the result still reaches the launcher
            self.say(f"could not write {Path(self.cfg.run_dir) / 'status.json'}: {err}")
        return result

    def _run(self) -> TrialResult:
        self._wait_until(list(self.expected), lambda k: k in self.info, REGISTER_TIMEOUT_S, "register")
        write_trial_targets(self)
        shown = list(self.expected)[:NAMES_SHOWN]
        more = len(self.expected) - len(shown)
        self.say(f"all {len(self.expected)} workers registered: "
                 + ", ".join(f"{self.expected[k]} (pid {self.info[k].get('pid')})" for k in shown)
                 + (f" and {more} more" if more else ""))
        for role in self.layout.order:
            group = [k for k in self.expected if self.roles[k] == role]
            if group:
                payload = self.configure_payload()
                self._configured.add(role)  # from now on a restarted one of this role is configured as it registers
                self._send([k for k in group if k not in self.pending], "configure", payload)
                self._wait_until(group, lambda k: self.states.get(k) == "ready", CONFIGURE_TIMEOUT_S, f"configure {role}")
        self._started = True  # first: a worker restarted from here on is started as it comes back (``_back``)
        self._send([k for k in self.expected if k not in self.pending], "start")
        self._trainer_progress = (self._trainer_updates(), time.monotonic())
        self.say("all workers started")
        deadline = time.monotonic() + self.cfg.timeout_seconds
        while self.done is None:
            self._tick(100)
            if time.monotonic() > deadline:
                return TrialResult(1, "timeout", f"timeout_seconds={self.cfg.timeout_seconds:g} reached before "
                                   f"total_env_steps={self.cfg.total_env_steps:,} ({self._trainer_updates()} of "
                                   f"{last_params_version(self.cfg)} updates)")
        return TrialResult(0, "done", f"done: {self.done}")

    def configure_payload(self) -> dict[str, Any]:
        """What every worker gets in ``configure``: env spec, extras spec, the addresses served so far."""
        peers: dict[str, dict[str, dict[str, str]]] = {}
        extras: dict[str, Any] = {}
        for key, ready in self.ready.items():
            role, index = self.expected[key].split("/")
            if isinstance(ready.get("addresses"), dict):
                peers.setdefault(role, {})[index] = ready["addresses"]
            if role == TRAINER and isinstance(ready.get("extras_spec"), dict):
                extras = ready["extras_spec"]
        return {"spec": spec_to_wire(self.spec), "extras_spec": extras, "peers": peers, "resume": self.resume}

    def _wait_until(self, keys: list[str], ready: Callable[[str], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        missing, next_look = list(keys), 0.0
        while True:
            now = time.monotonic()
            if now >= next_look:  # O(still missing), a few times a second: not once per message
                missing = [k for k in missing if not ready(k)]
                next_look = now + max(LOOK_EVERY_S, (time.monotonic() - now) / LOOK_SHARE)
                if not missing:
                    return
            if now > deadline:
                raise TrialEnded(TrialResult(1, "startup", f"{what} did not finish within {timeout:g} s; waiting for: "
                                             + ", ".join(self.expected[k] for k in missing)))
            self._tick(100)

    def _send(self, keys: list[str], kind: str, payload: dict[str, Any] | None = None) -> None:
        for key in self.server.send_many(keys, kind, payload):  # one message per relay for its workers
            self._lose(key, f"cannot deliver '{kind}' to it")

    # -- one tick: messages in, liveness checks --------------------------------------------------------
    def _tick(self, timeout_ms: int) -> None:
        now = time.monotonic()
        if now - self._last_tick > 1.0:  # we were not scheduled: heartbeats may still be in the sockets
            self._silence_grace_until = now + 2.0
        self._last_tick = now
        self._read_messages(timeout_ms)
        self._advance_restarts()
        if now >= self._next_liveness:
            self._next_liveness = now + LIVENESS_EVERY_S
            self._check_liveness()
        if self._started:
            self._check_progress()
            if now >= self._next_progress:
                self._next_progress = now + PROGRESS_EVERY_S
                self._show_progress()

    def _read_messages(self, timeout_ms: int) -> None:
        hang, incarnation, beats, states = self.cfg.layout.hang_seconds, self.incarnation, self.beats, self.states
        for msg in self.server.poll(timeout_ms=timeout_ms, accept=self._current, limit=POLL_BATCH):
            worker, payload = msg.worker, msg.payload
            if msg.kind == "heartbeat" and worker in incarnation and payload.get("state") == "running":
                beats[worker] = payload  # the hot path (a registered worker running), as the general one below
                states[worker] = "running"
                age = payload.get("loop_age_s")
                if isinstance(age, (int, float)) and age > hang:
                    self._hang_suspects.add(worker)
                continue
            if msg.worker not in self.expected:
                self.server.counts["unknown_worker"] += 1  # e.g. a stale worker of an earlier run of this trial
                continue
            if msg.worker not in self.incarnation and msg.kind != "register" and msg.worker in self.pending:
                continue  # the lost one's, sent before it was replaced and read only now
            if msg.kind == "register":
                self.info[msg.worker] = msg.payload
                self.incarnation[msg.worker] = str(msg.payload.get("incarnation", ""))
                if msg.worker in self.pending:
                    self._configure_newcomer(msg.worker)
            elif msg.kind in ("heartbeat", "status") and isinstance(msg.payload.get("state"), str):
                if msg.kind == "heartbeat":
                    self.beats[msg.worker] = msg.payload
                    age = msg.payload.get("loop_age_s")  # checked here, not in a pass over every worker's beat
                    if isinstance(age, (int, float)) and age > self.cfg.layout.hang_seconds:
                        self._hang_suspects.add(msg.worker)
                state = msg.payload["state"]
                if msg.kind == "status" and state == "ready":
                    self.ready[msg.worker] = msg.payload
                self.states[msg.worker] = state
                if state == "error":
                    self._lose(msg.worker, str(msg.payload.get("error", "")), error=True)
                elif state == "stopped":  # nobody asked it to: a signal, its launcher gone
                    self._lose(msg.worker, "it stopped on its own")
                elif state == "ready" and msg.worker in self.pending:
                    self._back(msg.worker)
            elif msg.kind == "done" and self.roles[msg.worker] == TRAINER:  # only a trainer may end the trial
                self.done = {k: v for k, v in msg.payload.items() if k != "incarnation"}
            elif msg.kind == "done":
                self.server.counts["done_not_from_a_trainer"] += 1
            elif msg.kind == "names" and self.name_store is not None:  # layout.names=controller
                self.server.send(msg.worker, "names_reply", answer_names(self.name_store, msg.payload))
        if self.server.alive:  # relays' signs of life for running workers whose heartbeats said nothing new
            self.server.take_alive(self.incarnation.get)

    def _current(self, msg: ControlMessage) -> bool:
        """Whether ``msg`` comes from the incarnation now serving its worker key (``ControlServer.poll``)."""
        incarnation = msg.payload.get("incarnation", "")
        current = self.incarnation.get(msg.worker)
        if current is not None and current == incarnation:  # the common case, first (N heartbeats a second)
            return True
        incarnation = str(incarnation)
        if incarnation in self.replaced.get(msg.worker, ()):
            return False
        return current is None or current == incarnation

    # -- restarts (srljax/system/shell/restarts.py) ---------------------------------------------------------
    def _lose(self, key: str, why: str, error: bool = False) -> None:
        """``key`` is lost: restart it if its role and budget allow (after ``start``), else end the trial."""
        name = self.expected[key]
        if fault := environment_fault(why if error else "", self.cfg.run_dir):  # a restart would meet the same disk
            # its error's last line: the traceback above it is in the worker's log where the disk still took it
            raise TrialEnded(self._failed(key, f"{_last_line(why)}\nnot restarted: {fault}"))
        if not (self._start and self._kill and self.restarts.allowed(name)):  # start-up included
            raise TrialEnded(self._failed(key, why) if error else self._lost(key, why))
        short = f"failed: {_last_line(why)}" if error else why
        role = self.roles[key]
        if self.restarts.policy(role) == "group":  # the others of its group go with it, after it
            group = [k for k in self.expected if self.roles[k] == role and k != key and k not in self.pending]
            self._restart(key, short)
            for other in group:
                self._restart(other, f"restarted with {name}'s group: {short}")
            return
        self._restart(key, short)

    def _restart(self, key: str, short: str) -> None:
        name = self.expected[key]
        attempt, delay = self.restarts.record(name, short)
        self.say(f"restarting {self._who(key)} in {delay:g} s (restart {attempt} of "
                 f"layout.max_restarts={self.restarts.max}): {short}")
        old = self.pending.pop(key, None)
        addresses = old.old_addresses if old else dict(self.ready.get(key, {}).get("addresses") or {})
        self._kill(name)  # make sure the old one is gone before its successor starts (Slurm: by its register info)
        self._forget(key)
        self.pending[key] = Pending(short, attempt, time.monotonic() + delay, addresses, since=time.monotonic())

    def _forget(self, key: str) -> None:
        """Stop listening to the lost incarnation of ``key``."""
        if (incarnation := self.incarnation.pop(key, None)) is not None:
            self.replaced.setdefault(key, set()).add(incarnation)
        for table in (self.info, self.beats):
            table.pop(key, None)
        self.states[key] = "restarting"
        self.server.forget(key)

    def _advance_restarts(self) -> None:
        now = time.monotonic()
        for key, p in list(self.pending.items()):
            if p.phase == "waiting" and now >= p.start_at:
                role, index = self.expected[key].split("/")
                p.phase, p.since = "starting", now
                assert self._start is not None
                self._start(role, int(index))
            elif p.phase == "starting" and now - p.since > REGISTER_TIMEOUT_S:
                self._lose(key, f"restarted, it did not register within {REGISTER_TIMEOUT_S:g} s")
            elif p.phase == "configuring" and now - p.since > CONFIGURE_TIMEOUT_S:
                self._lose(key, f"restarted, it did not finish configure within {CONFIGURE_TIMEOUT_S:g} s")

    def _configure_newcomer(self, key: str) -> None:
        pending = self.pending[key]
        if self.roles[key] not in self._configured:  # start-up, before its role's turn: it is configured with them
            self.pending.pop(key)
            self.restarts.came_back(self.expected[key])
            self.say(f"{self._who(key)} is back after {time.monotonic() - pending.lost_at:.1f} s (restart "
                     f"{pending.attempt}), before its group was configured")
            return
        pending.phase, pending.since = "configuring", time.monotonic()
        write_trial_targets(self)  # it serves its metrics at a new port
        payload = {**self.configure_payload(), "restarted": True}
        if self.roles[key] == TRAINER:  # it continues from the newest checkpoint, if one was written
            payload["resume"] = read_meta(Path(self.cfg.run_dir) / "checkpoints") is not None
        self._send([key], "configure", payload)

    def _back(self, key: str) -> None:
        """The newcomer is set up: start it, and tell every other worker if it serves at new addresses."""
        pending = self.pending.pop(key)
        if self._started:  # else the trial's ``start`` reaches it with everyone's
            self._send([key], "start")
        self.restarts.came_back(self.expected[key])
        role, index = self.expected[key].split("/")
        addresses = self.ready[key].get("addresses") or {}
        moved = isinstance(addresses, dict) and addresses and addresses != pending.old_addresses
        if moved:
            # registered newcomers too: their configure went out first, so they read this after it
            # (unconfigured ones get them in their ``configure``)
            others = [k for k in self.info if k != key and self.roles[k] in self._configured]
            self._send(others, "peers", {"role": role, "index": int(index), "addresses": dict(addresses)})
        trainers = [k for k in self.info if self.roles[k] == TRAINER]
        self._send(trainers, "restarts", {"count": self.restarts.total})
        self.say(f"{self._who(key)} is back after {time.monotonic() - pending.lost_at:.1f} s (restart "
                 f"{pending.attempt}){'; its new addresses went to the other workers' if moved else ''}")

    def _check_liveness(self) -> None:
        exited = self._exited()
        if exited:  # a worker's last words (its error) may have arrived after this tick read the socket
            self._read_messages(50)  # (sent before it exited; on its way for a moment at most)
            deadline = time.monotonic() + 2.0  # on a crowded machine the moment can be longer (0.5 s was not, at load 20+)
            while time.monotonic() < deadline and any(
                    self.states.get(self._key_of.get(n)) not in ("stopped", "error") for n in exited):
                self._read_messages(50)
        for name, code in exited.items():
            key = self._key_of.get(name)
            waiting = key in self.pending and self.pending[key].phase == "waiting"  # the old one's exit
            if key is not None and not waiting and self.states.get(key) not in ("stopped", "error"):
                self._lose(key, f"its process exited with code {code}")
        now = time.monotonic()
        if now < self._silence_grace_until:
            return
        # before start a worker may be deep in setup on a crowded machine (a restarted one too), and
        # until its heartbeats say it has seen ``start`` they come every STARTUP_HEARTBEAT_S; a
        # crash is still seen at once through ``exited``, a hang through the configure timeout
        # One tight pass each finds the few candidates (at 10,000 workers the full checks over everyone
        # took 6-9 ms of the main thread five times a second, a stall every command reply waited out)
        # no worker is allowed less silence than this (before start none less than STARTUP_SILENCE_S: at
        # 100,000 workers beating every 5 s, a 5 s bound made nearly all of them candidates, 0.2 s a pass)
        quiet_since = now - (self._lost_timeout if self._started else max(self._lost_timeout, STARTUP_SILENCE_S))
        for key in [k for k, seen in self.server.last_seen.items() if seen < quiet_since]:
            if key not in self.info:
                continue
            # its newest word on its state: a status (``start``'s reply) or a heartbeat; behind a relay the
            # first running beat after that status may come as a sign of life alone (relay.py)
            state = self.states.get(key, self.beats.get(key, {}).get("state"))
            started = self._started and key not in self.pending and state not in PRE_START_STATES
            allowed = self._lost_timeout if started else max(self._lost_timeout, STARTUP_SILENCE_S)
            silent = now - self.server.last_seen.get(key, now)
            if silent > allowed and self.states.get(key) not in ("stopped", "error"):
                self._lose(key, f"no heartbeat for {silent:.1f} s (allowed {allowed:g} s; "
                                f"last heartbeat: {self.beats.get(key)})")
        hang = self.cfg.layout.hang_seconds
        for key in list(self._hang_suspects):  # those whose heartbeat said so (``_read_messages``)
            beat = self.beats.get(key, {})  # a restart of an earlier one's group may have forgotten it
            age = beat.get("loop_age_s")
            if not (isinstance(age, (int, float)) and age > hang):
                self._hang_suspects.discard(key)  # its loop turned again, or it is gone
            elif beat.get("state") == "running":
                waits = f", waiting for: {beat['waiting']}" if beat.get("waiting") else ""
                self._lose(key, f"hung: its main loop has not turned for {age:.0f} s (layout.hang_seconds={hang:g}) "
                                f"while its process still heartbeats{waits}")

    def _show_progress(self) -> None:
        """The newest metrics line, once per new update (several policies: the first one's file)."""
        if not self._verbose:
            return
        run_dir = Path(self.cfg.run_dir)
        trained = self.plan.policies
        path = run_dir / "policies" / trained[0] / "metrics.jsonl" if trained else run_dir / "metrics.jsonl"
        record = last_json_line(path)
        if record.get("update") != self._shown_update:
            self._shown_update = record.get("update")
            print(f"[progress] {progress_line(record, self.cfg)}", flush=True)

    def _trainer_updates(self) -> int:
        updates = [int(self.beats[k].get("progress", 0)) for k in self._trainers if k in self.beats]
        return min(updates) if updates else 0

    def _check_progress(self) -> None:
        """A trainer that makes no update for ``layout.stall_seconds`` ends the trial as stalled."""
        updates, since = self._trainer_progress
        now = time.monotonic()
        current = self._trainer_updates()
        if current != updates:
            self._trainer_progress = (current, now)
            return
        if now - since > self.cfg.layout.stall_seconds and current < last_params_version(self.cfg):
            waiting = [f"{self.expected[k]} waits for {b['waiting']}" if self.roles[k] == TRAINER
                       else f"{self.expected[k]}: {b['waiting']}"
                       for k, b in self.beats.items() if b.get("waiting")]
            raise TrialEnded(TrialResult(1, "stalled", (
                f"stalled: no update for {now - since:.0f} s (layout.stall_seconds={self.cfg.layout.stall_seconds:g}; "
                f"{current} of {last_params_version(self.cfg)} updates done); " + ("; ".join(waiting) or "no worker says why"))))

    def _who(self, key: str) -> str:
        return f"worker {self.expected[key]} (pid {self.info.get(key, {}).get('pid', '?')})"

    def _with_log(self, key: str, text: str) -> str:
        tail = self._log_tail(self.expected[key]).rstrip()
        return text + (f"; last log lines:\n{tail}" if tail else "")

    def _budget(self, key: str) -> str:
        """Why a loss of ``key`` was not restarted, when restarting it was possible at all."""
        name = self.expected[key]
        count = self.restarts.counts[name]
        if not count:
            return ""
        return (f" (restarted {count} of layout.max_restarts={self.restarts.max} times, the last after: "
                f"{self.restarts.last_reason[name]})")

    def _lost(self, key: str, why: str) -> TrialResult:
        self.states[key] = "lost"
        return TrialResult(1, "lost", self._with_log(key, f"{self._who(key)} lost: {why}{self._budget(key)}"))

    def _failed(self, key: str, error: str) -> TrialResult:
        self.states[key] = "error"
        budget = self._budget(key)
        return TrialResult(1, "error", f"{self._who(key)} failed{budget}:\n{error.rstrip()}")

    # -- stopping ----------------------------------------------------------------------------------------
    def stop_all(self, grace_s: float = STOP_GRACE_S) -> list[str]:
        """Send ``stop`` to every live worker, one role at a time, clients first (actors before the policy
        workers, buffers and trainers they talk to); return the names that did not stop in time.

        A role's servers close only once its clients have stopped or ``TIER_WAIT_S`` has passed: a client
        socket reading replies from a server that closes under it can abort the whole process inside libzmq
        (``Assertion failed: !_more``, seen at trial ends in bench/liveness.py's threads trials)."""
        order = [[k for k in self.expected if self.roles[k] == role] for role in reversed(self.layout.order)]
        tiers = [[k for k in keys if self.states.get(k) not in ("lost", "stopped", "error") and k in self.info]
                 for keys in order]
        deadline = time.monotonic() + grace_s
        for tier in (t for t in tiers if t):
            self.server.send_many(tier, "stop")
            if self._await_stopped(tier, min(deadline, time.monotonic() + TIER_WAIT_S)) is None:
                deadline = 0.0  # a second Ctrl-C: the rest are told, nobody is waited for (the backend kills them)
        live = [k for tier in tiers for k in tier]
        exited = self._await_stopped(live, deadline) or set(self._exited())
        late = [self.expected[k] for k in live if self.states.get(k) not in ("stopped", "error")
                and self.expected[k] not in exited]
        if late:
            self.say(f"did not stop within {grace_s:g} s: {', '.join(late)}")
        return late

    def _await_stopped(self, keys: list[str], until: float) -> set[str] | None:
        """Read status messages until every one of ``keys`` has stopped (or its process exited) or ``until``;
        the exited workers' names, or None when a Ctrl-C ended the wait."""
        exited: set[str] = set(self._exited())
        waiting, next_look = keys, 0.0
        while (now := time.monotonic()) < until:
            if now >= next_look:  # O(still running), a few times a second
                exited = set(self._exited())
                waiting = [k for k in waiting if self.states.get(k) not in ("stopped", "error")
                           and self.expected[k] not in exited]
                next_look = now + max(LOOK_EVERY_S, (time.monotonic() - now) / LOOK_SHARE)
                if not waiting:
                    break
            try:
                for msg in self.server.poll(timeout_ms=100, limit=POLL_BATCH):
                    if msg.worker in self.expected and msg.kind in ("status", "heartbeat"):
                        state = msg.payload.get("state")
                        if isinstance(state, str) and self.states.get(msg.worker) != "stopped":
                            self.states[msg.worker] = state
            except KeyboardInterrupt:
                return None
        return exited

    def close(self) -> None:
        self.names.delete(worker_key(self.cfg.name, self.cfg.trial, CONTROLLER, 0))
        self.server.close()
        if self.exporter is not None:
            self.exporter.close()
        if self._own_ctx and isinstance(self.ctx, WireContext):
            self.ctx.close()


def _last_line(text: str) -> str:
    """The last non-empty line of a traceback: ``ValueError: boom``."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"
