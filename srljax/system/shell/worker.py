"""The worker shell every role derives from: run loop, control commands, heartbeats, metrics.

    class EchoWorker(Worker):
        role = "echo"          # a user-defined role: name it in layout.custom_roles ("pkg.mod:EchoWorker")
        serves = ()            # streams it binds (``self.register``); clients get the addresses
        placement = "cpu"      # srljax.parallel.devices rule for its process
        def setup(self): ...   # bind servers (``self.register``), connect to peers (``self.connect_peers``);
                               # make every socket with ``ctx=self.ctx``: it carries auth keys and bounds
        def poll(self): ...    # one short slice of work (return quickly)
        def close(self): ...   # release sockets, envs; final checkpoint

    code = EchoWorker(cfg, index=0, names=names).run()   # blocks until the controller says stop

``run`` registers with the controller and follows its commands (``configure`` -> ``setup``; ``start`` /
``pause``; ``stop`` -> ``close``); an exception goes to the controller as ``status error`` and ``run``
returns 1. A control thread owns the control socket and heartbeats (with the main loop's age, ``progress()``
and ``waiting()``) even while the main thread compiles or updates. Every message carries the worker's
``incarnation``, so a restarted worker is told from the one it replaces; ``peers`` moves connected endpoints
to a restarted server's new address. Metrics go to ``workers/<role>-<i>.jsonl`` and the worker's Prometheus
endpoint (``srljax/telemetry/exporter.py``). ``docs/architecture.md``, "Control".
"""

from __future__ import annotations

import json
import math
import os
import queue
import socket
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, ClassVar

import zmq

from srljax.comm import ControlClient, ControlMessage, NameResolver, worker_key
from srljax.comm.control import CONTROL_ADDRESS_ENV
from srljax.comm.doorbell import Doorbell
from srljax.comm.samples import SHM_SLOTS
from srljax.comm.security import KeyRing, WireContext
from srljax.comm.served_names import NameServiceError
from srljax.config import Experiment
from srljax.layout import ACTOR, CONTROLLER, Plan, plan_of
from srljax.system.shell.auth import worker_context
from srljax.system.shell.bounds import check_message_cap, largest_messages, stream_limits, stream_message_limits
from srljax.system.shell.common import spec_from_wire, stream_key, trial_name
from srljax.telemetry.exporter import METRICS_STREAM, serve_worker
from srljax.telemetry.stats import WorkerStats
from srljax.types import EnvSpec

SLOT_SLACK = 1 << 16  # a shared-memory slot's room for its arrays' alignment beyond the largest message

HEARTBEAT_S = 1.0
STARTUP_HEARTBEAT_S = 5.0  # before ``start`` (the controller allows 30 s of silence then): 10,000 workers
# registering and configuring send the controller 2,000 heartbeats a second instead of 10,000
METRICS_EVERY_S = 2.0
LOOKUP_TIMEOUT_S = 120.0  # how long a worker waits for the controller's address
DELIVER_S = 3.0  # after ``run`` ends: how long its last messages (``stopped``, an error) may wait for the connection
CONTROL_IDLE_MS = 250  # the control thread's longest wait when it has nothing to do (a command or a queued message
# wakes it at once): the parent-pid check's period; at 20 ms, 64 actors on 2 cores spent ~1/5 of their CPU waking


def lower_priority(nice: int) -> None:
    """Set the calling thread's nice value and make it a batch thread (Linux keeps both per thread; threads it
    starts inherit them). ``SCHED_BATCH``: a thread that wakes (an actor whose envs stepped) does not preempt the
    one running (a trainer's update), which otherwise loses its caches to every actor's wake-up.

    A process that leads its own session (local processes start each worker so) also has its own autogroup
    where the kernel groups by session (``/proc/sys/kernel/sched_autogroup_enabled``): the CPU is shared
    between autogroups first, so a thread's nice value counts only inside its process, and 64 actors at
    nice 19 still took 64/65 of the cores from the trainer. Such a process nices its autogroup too."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
        if os.sched_getscheduler(0) == os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (OSError, AttributeError):  # not Linux, or not allowed: run at the priority we have
        return
    try:
        if os.getsid(0) == os.getpid():  # never the autogroup of the session we were started from (a shell's)
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
    except OSError:  # no autogroups (a server kernel), or not allowed
        pass


class Worker:
    role: ClassVar[str] = "worker"
    serves: ClassVar[tuple[str, ...]] = ()
    placement: ClassVar[str] = "cpu"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        # Every socket of the worker comes from ``self.ctx``: its own context, whose rules give it this
        # role's CURVE keys (``keys``; None: layout.auth off) and receive bounds (srljax/system/shell/auth.py).
        self._own_ctx = ctx is None
        self._ctx_lock = threading.Lock()  # who closes an own context: ``run`` as it ends, or the control thread
        self._control_ended = False  # if that is still sending its last messages then
        self._ctx_left_to_control = False
        self.ctx: zmq.Context = worker_context(cfg, keys, self.role) if ctx is None else ctx
        if keys is not None and not isinstance(self.ctx, WireContext):
            raise TypeError("keys need the worker's own context: pass keys or ctx, not both")
        self.cfg, self.index, self.names = cfg, index, names.for_worker(self)  # layout.names=controller: asks it
        self.plan: Plan = plan_of(cfg)  # the run's mode and roles, decided once (srljax/layout.py)
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
        self._bell = Doorbell()  # rung with every message queued for the control thread
        self._last_progress = time.monotonic()
        self._progress_count = 0  # the last value ``progress()`` returned, for heartbeats
        self._metrics_file: Any = None
        self._next_flush = 0.0
        self._flushed_state = ""  # the state in the last metrics line
        self.spec: EnvSpec | None = None  # from configure
        self.extras_spec: dict[str, tuple[tuple[int, ...], str]] = {}
        self.resume = False  # set by ``configure``: the trial continues from its newest checkpoint
        self.restarted = False  # set by ``configure``: this worker replaces a lost one
        self.peers: dict[str, dict[int, dict[str, str]]] = {}  # role -> index -> stream -> address
        self._addresses: dict[str, str] = {}
        self.incarnation = uuid.uuid4().hex[:12]  # on every control message: which of the workers of this key
        self._followed: list[tuple[Any, str, str, frozenset[int] | None]] = []  # connect_peers: (endpoint, role, stream, indices)
        self.trial_restarts = 0  # worker restarts in this trial so far (the controller's ``restarts``)
        self.exporter: Any = None  # its Prometheus endpoint, from ``run`` (srljax/telemetry/exporter.py)
        self._asked: dict[int, queue.Queue[dict[str, Any]]] = {}  # ask_controller: request id -> where its reply goes
        self._ask_lock = threading.Lock()
        self._ask_id = 0
        self._exported: dict[str, Any] = {}  # the last ``metrics()``, which the endpoint serves

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

    def peers_changed(self, role: str, index: int) -> None:
        """Worker ``role``/``index`` was restarted and serves at new addresses (``self.peers`` has them,
        endpoints from ``connect_peers`` already follow); e.g. resend what the lost one held."""

    def ready_info(self) -> dict[str, Any]:
        """What this worker tells the controller once set up, for workers configured after it."""
        return {}

    def progress(self) -> int:
        """A counter that grows while the worker does its job (the trainer: updates); in heartbeats."""
        return 0

    def waiting(self) -> str:
        """What the main loop waits for now, for the controller's stall report ("" if nothing)."""
        return ""

    # -- helpers for subclasses ------------------------------------------------------------
    def log(self, text: str) -> None:
        print(f"[{self.name} pid={os.getpid()}] {text}", flush=True)

    def register(self, stream: str, address: str) -> None:
        """Where this worker's ``stream`` socket can be reached: the controller passes it on to the
        workers configured after this one; the names service keeps it for tools and debugging."""
        self._addresses[stream] = address
        self.names.add(stream_key(self.cfg, self.role, self.index, stream), address)

    def samples_options(self, sender: bool, message_columns: int = 0, fewest_columns: int = 0) -> dict[str, Any]:
        """A samples endpoint's keyword arguments under ``layout.shared_memory`` (``srljax/comm/shm.py``); {} without.

        A receiver takes descriptors. A sender's ring has room for a whole batch of its messages beyond
        ``SHM_SLOTS`` (a trainer holds a batch's segments until it cuts the batch, and may need them all from one
        sender: fewer slots would wait forever), messages of ``message_columns`` columns (a buffer's) or else
        of ``env.num_envs`` (an actor's segment; its slots are as large as its first message), at least
        ``fewest_columns`` each where given (a policy's part of a segment: 1). Slots are given pages only as far as
        they are written."""
        if not self.cfg.layout.shared_memory:
            return {}
        if not sender:
            return {"shared_memory": True}
        columns = max(1, fewest_columns or message_columns or self.cfg.env.num_envs)
        out = {"shared_memory": True, "slots": SHM_SLOTS + math.ceil(max(self.cfg.batch_envs, 1) / columns)}
        if message_columns and self.spec is not None:
            cfg = self.cfg
            per_column = largest_messages(cfg, self.spec, self.extras_spec)["samples"] // max(cfg.env.num_envs,
                                                                                              cfg.batch_envs)
            out["slot_bytes"] = per_column * message_columns + SLOT_SLACK
        return out

    def peers_of(self, role: str, stream: str) -> list[str]:
        """Addresses of every ``role`` worker serving ``stream``, by index (from the configure message)."""
        by_index = self.peers.get(role, {})
        return [by_index[i][stream] for i in sorted(by_index) if stream in by_index[i]]

    def connect_peers(self, endpoint: Any, role: str, stream: str, indices: list[int] | None = None) -> list[str]:
        """Connect ``endpoint`` (a client ``Endpoint``) to every ``role`` worker serving ``stream`` (or only
        those ``indices``), and keep it connected: when one restarts at a new address, the endpoint
        leaves the old one and connects to the new. Returns the addresses connected now."""
        wanted = None if indices is None else frozenset(indices)
        by_index = self.peers.get(role, {})
        addresses = [by_index[i][stream] for i in sorted(by_index)
                     if stream in by_index[i] and (wanted is None or i in wanted)]
        for address in addresses:
            endpoint.connect(address)
        self.follow_peers(endpoint, role, stream, indices)
        return addresses

    def follow_peers(self, endpoint: Any, role: str, stream: str, indices: list[int] | None = None) -> None:
        """Like ``connect_peers`` for an endpoint already connected (e.g. a ``ParamsFollower``'s
        subscriber): only follow ``role``'s workers to their new addresses when they restart."""
        self._followed.append((endpoint, role, stream, None if indices is None else frozenset(indices)))

    def tell_controller(self, kind: str, payload: dict[str, Any] | None = None) -> None:
        """Queue a message for the controller (``done``, ``status``); the control thread sends it."""
        self._outbox.put((kind, dict(payload or {})))
        self._bell.ring()

    def ask_controller(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """A ``names`` request to the controller and its reply, over the control channel (names served
        by the controller, ``srljax/comm/served_names.py``); any thread, once ``run`` has begun."""
        with self._ask_lock:
            self._ask_id += 1
            request_id, reply = self._ask_id, queue.Queue(maxsize=1)
            self._asked[request_id] = reply
        self.tell_controller("names", {**request, "id": request_id})
        try:
            return reply.get(timeout=timeout_s)
        except queue.Empty:
            raise NameServiceError(f"{self.name}: the controller did not answer names {request.get('op')} "
                                   f"{request.get('key', request.get('prefix', ''))!r} within {timeout_s:g} s "
                                   f"(layout.names=controller): is it running?") from None
        finally:
            self._asked.pop(request_id, None)

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
        # a node's relay (srljax/system/shell/relay.py) when the launcher set one, else the controller itself
        address = os.environ.get(CONTROL_ADDRESS_ENV) or \
            self.names.wait(worker_key(self.cfg.name, self.cfg.trial, CONTROLLER, 0), timeout=controller_timeout)
        self.exporter = serve_worker(self)  # its address goes to the controller in ``register``
        control = threading.Thread(target=self._control_loop, args=(address,), name=f"{self.name}-control", daemon=True)
        control.start()  # before any other names call: names served by the controller travel through it
        if self.exporter is not None:
            self.names.add(stream_key(self.cfg, self.role, self.index, METRICS_STREAM), self.exporter.address)
        self.log(f"started; controller at {address}")
        if self.placement == ACTOR and self.cfg.layout.actor_nice:
            lower_priority(self.cfg.layout.actor_nice)  # this loop's thread only: the control thread keeps its own
        code = 0
        try:
            while not self._stop.is_set():
                self._handle_commands(wait_s=0.0 if self.state == "running" else 0.05)
                if self.state == "running" and not self._stop.is_set():
                    self.poll()
                self._last_progress = time.monotonic()  # the loop turned: its age is 0 again
                self._flush_metrics()
        except Exception:
            code = 1
            self._report_error("run", traceback.format_exc())
        finally:
            if code == 0:  # heartbeats during a long close (a final checkpoint) must not read as a hung loop
                self.state = "stopping"
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
            self._bell.ring()
            control.join(timeout=5.0)
            if not control.is_alive():
                self._bell.close()
            if self.exporter is not None:
                self.exporter.close()
            if self._own_ctx and isinstance(self.ctx, WireContext):
                with self._ctx_lock:  # a socket is closed only by the thread that uses it (libzmq's rule)
                    if self._control_ended:
                        self.ctx.close()
                    else:  # its socket is still in use there: that thread ends the context as it leaves
                        self._ctx_left_to_control = True
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
            self._configure(msg.payload)
            self.setup()
            jax = sys.modules.get("jax")  # the devices this process computes on, if it computes (never imported here)
            if jax is not None:
                dispatch = "inline" if not jax.config.values["jax_cpu_enable_async_dispatch"] else "async"
                self.log(f"jax devices: {', '.join(f'{d.platform}:{d.id}' for d in jax.local_devices())} "
                         f"(CPU programs dispatched {dispatch})")
            self.state = "ready"
            self.tell_controller("status", {"state": self.state, "addresses": dict(self._addresses), **self.ready_info()})
            return
        elif msg.kind == "start" and self.state in ("ready", "paused"):
            self.state = "running"
        elif msg.kind == "pause" and self.state == "running":
            self.state = "paused"
        elif msg.kind == "stop":
            self.request_stop("stop command")
            return
        elif msg.kind == "peers":
            self._peer_moved(msg.payload)
            return
        elif msg.kind == "restarts":
            self.trial_restarts = int(msg.payload.get("count", self.trial_restarts))
            return
        self.tell_controller("status", {"state": self.state})

    def _peer_moved(self, payload: dict[str, Any]) -> None:
        """``peers``: worker ``role``/``index`` came back serving ``addresses``; move the followed endpoints."""
        role, index, streams = payload.get("role"), payload.get("index"), payload.get("addresses")
        if not (isinstance(role, str) and isinstance(index, int) and isinstance(streams, dict)):
            return
        streams = {str(k): str(v) for k, v in streams.items()}
        old = self.peers.get(role, {}).get(index, {})
        self.peers.setdefault(role, {})[index] = streams
        rules = getattr(self.ctx, "rules", None)
        if rules is not None:  # pin the role's key on the new addresses, as configure does
            rules.peer_roles.update({address: role for address in streams.values()})
        moved = []
        for endpoint, followed_role, stream, indices in self._followed:
            if followed_role != role or (indices is not None and index not in indices) or stream not in streams:
                continue
            if old.get(stream) != streams[stream]:
                if old.get(stream):
                    endpoint.disconnect(old[stream])
                endpoint.connect(streams[stream])
                moved.append(stream)
        if moved:
            self.log(f"{role}/{index} was restarted: following its {', '.join(moved)} to {streams}")
        self.peers_changed(role, index)

    def _configure(self, payload: dict[str, Any]) -> None:
        self.resume = payload.get("resume") is True  # continue the trial from its newest checkpoint
        self.restarted = payload.get("restarted") is True  # a successor of a lost worker of this trial
        if isinstance(payload.get("spec"), dict):
            self.spec = spec_from_wire(payload["spec"])
        extras = payload.get("extras_spec")
        if isinstance(extras, dict):
            self.extras_spec = {str(k): (tuple(v[0]), str(v[1])) for k, v in extras.items()}
        peers = payload.get("peers")
        if isinstance(peers, dict):
            self.peers = {str(role): {int(i): dict(streams) for i, streams in by_index.items()}
                          for role, by_index in peers.items()}
        rules = getattr(self.ctx, "rules", None)
        if rules is not None:  # the keys to pin when connecting to these addresses, and the receive bounds
            rules.peer_roles.update({address: role for role, by_index in self.peers.items()
                                     for streams in by_index.values() for address in streams.values()})
            if self.spec is not None:
                rules.limits.update(stream_limits(self.cfg, self.spec, self.extras_spec))
                rules.message_limits.update(stream_message_limits(self.cfg, self.spec, self.extras_spec))
                check_message_cap(self.cfg, largest_messages(self.cfg, self.spec, self.extras_spec))

    # -- control thread ---------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        node = os.environ.get("SLURMD_NODENAME")  # on Slurm: where the controller can reach this process
        return {"pid": os.getpid(), "role": self.role, "index": self.index, "host": socket.gethostname(),
                **({"node": node} if node else {}), **({"metrics": self.exporter.address} if self.exporter else {})}

    def _control_loop(self, address: str) -> None:
        # Nothing is queued before the connection is up (``ControlClient``): ``register`` and the
        # outbox wait here until they leave, in order; a heartbeat that cannot leave now is dropped
        # (the next one says the same, later), so a late connection brings no stale backlog.
        client = ControlClient(address, self.trial, self.key, ctx=self.ctx)
        me = {"incarnation": self.incarnation}
        unsent: list[tuple[str, dict[str, Any]]] = [("register", self._identity())]
        registered = False  # heartbeats follow the register message
        try:
            next_beat, ticks, last_beat, beats, give_up = 0.0, 0, time.monotonic(), 0, math.inf
            while True:
                while True:
                    try:
                        unsent.append(self._outbox.get_nowait())
                    except queue.Empty:
                        break
                while unsent and client.send(unsent[0][0], {**unsent[0][1], **me}, timeout_ms=0):
                    kind, _ = unsent.pop(0)
                    registered = registered or kind == "register"
                now = time.monotonic()
                if self._control_done.is_set():
                    give_up = min(give_up, now + DELIVER_S)
                    if not unsent or now > give_up:
                        break
                # one clock for both rates, so workers keep the phases their start-up spread them over
                # (a beat on ``start`` itself would line 10,000 of them up into one burst a second)
                due = registered and now >= next_beat
                if due:
                    next_beat, ticks = now + HEARTBEAT_S, ticks + 1
                if due and (self.state in ("running", "paused", "stopping")
                            or ticks % round(STARTUP_HEARTBEAT_S / HEARTBEAT_S) == 1):
                    beats += 1
                    # gap_s: how late this beat is; loop_age_s: since the main loop last finished a poll
                    client.send("heartbeat", {"state": self.state, "seq": beats, "gap_s": round(now - last_beat, 3),
                                              "loop_age_s": round(now - self._last_progress, 3),
                                              "progress": self._progress(), "waiting": self._waiting(), **me},
                                timeout_ms=0)
                    last_beat = now
                if unsent or not registered or self._control_done.is_set():
                    wait_ms = 20  # waiting for the connection, or for the last messages to leave
                else:  # until the next heartbeat is due, a command arrives or the worker queues a message
                    wait_ms = min(CONTROL_IDLE_MS, max(1, int((next_beat - time.monotonic()) * 1000)))
                msg = client.recv(timeout_ms=0) if self._bell.wait(client.sock, wait_ms) else None
                if msg is not None and msg.kind == "names_reply":
                    asked = self._asked.get(msg.payload.get("id"))  # type: ignore[arg-type]
                    if asked is not None and asked.empty():
                        asked.put(msg.payload)
                elif msg is not None:
                    self._inbox.put(msg)
                if self._parent_pid is not None and os.getppid() != self._parent_pid:
                    self.request_stop("launcher exited")
        finally:
            client.close()
            with self._ctx_lock:
                self._control_ended = True
                if self._ctx_left_to_control:
                    self.ctx.close()

    def _progress(self) -> int:
        try:  # a subclass hook, called before ``setup`` too: an exception must not end the heartbeats
            self._progress_count = int(self.progress())
        except Exception:
            pass
        return self._progress_count

    def _waiting(self) -> str:
        try:  # read from the control thread while the main loop changes it: a torn read must not kill it
            return str(self.waiting())
        except Exception:
            return ""

    # -- metrics -------------------------------------------------------------------------------
    def _flush_metrics(self, force: bool = False) -> None:
        now = time.monotonic()
        # a new state is written at once: `launch status` reads a worker's state from its last line
        if not force and now < self._next_flush and self.state == self._flushed_state:
            return
        self._next_flush, self._flushed_state = now + METRICS_EVERY_S, self.state
        if self._metrics_file is None:
            path = Path(self.cfg.run_dir) / "workers" / f"{self.role}-{self.index}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._metrics_file = path.open("a")
        self._exported = self.metrics()  # main thread only (it reads sockets); the Prometheus endpoint serves it
        record = {"time": round(time.time(), 3), "pid": os.getpid(), "role": self.role, "index": self.index,
                  "state": self.state, "cpu_s": round(time.process_time(), 4), **self.stats.snapshot(), **self._exported}
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
