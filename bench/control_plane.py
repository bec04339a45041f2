"""The control plane at scale: the real controller against 100 to 100,000 light fake workers.

    python bench/control_plane.py                        # N = 100, 1,000, 10,000; 10 s of steady state each
    python bench/control_plane.py --workers 100000       # 100 nodes' relays of 1,000 workers each (--per-node)
    python bench/control_plane.py --workers 1000 --seconds 20 --procs 2 --auth off --names folder
    python bench/control_plane.py --workers 10000 --profile /tmp/controller.prof   # cProfile of the controller
    BENCH_PROFILE_FAKES=/tmp/fakes.prof python bench/control_plane.py --workers 1000 --no-isolated

For each N: a CartPole remote-inference layout (1 trainer, N/100 policy workers, the rest actors),
``layout.auth=on`` with the trial's keys in a fresh run folder, ``layout.names=controller`` (or
``--names folder``), the **real** ``Controller`` (``srljax/system/shell/controller.py``) in its own
process, found through the run folder as ``launch.local`` workers find it, and N fake workers
spread over ``--procs`` processes (started, and their imports done, before the controller binds).
Each fake worker owns one DEALER with its role's CURVE key pair pinned to the controller's key (so
the controller's ZAP handler and sender check run as for real workers) and speaks the worker
protocol of ``srljax/system/shell/worker.py``: ``ZMQ_IMMEDIATE``, register (kept until its connection
is up), a heartbeat every second once started (``HEARTBEAT_S``; every ``STARTUP_HEARTBEAT_S``
before; dropped while it cannot leave), its metrics
address added to the name service at start and ``NAMES_RATE`` lookups a second per process while
running (over the control channel, or in the folder), ``status ready`` on ``configure`` (servers
report addresses, so later configures carry peers), ``status`` on ``start`` and on any ``status``
command, ``stopped`` on ``stop``. A process drives its workers from one epoll loop on the sockets'
``ZMQ_FD``.

Printed per N: seconds until all registered and all configured (from the controller's bind),
p50/p99 heartbeat latency (a beat's send to the controller's poll returning it; CLOCK_MONOTONIC is
system-wide), p50/p99 command round trip (the controller sends ``status`` to ``--ping-rate``
workers a second, round robin; a fake answers at once, so this is the controller and transport's
share: a real worker's control thread adds up to its 20 ms receive slice), the controller
process's CPU (cores, all its threads, over the steady window) and RSS, seconds to stop all, and
the name service: ``get`` p50/p99 and one ``list`` of a role with N entries for ``MemoryNames``
and ``DirectoryNames``, the workers' start-up read of the controller's address from the folder,
and the trial's own backend as the workers saw it (first call at start-up, lookups while running).
For each phase (register; configure and start; steady window) it also prints the wall time, the
controller's CPU by thread (main, zmq I/O, ZAP) and how long its threads were runnable but waiting
for a CPU (``/proc/PID/task/*/schedstat``), and the fake workers' CPU and wait: on a crowded
machine that says whether the controller or the box was the limit. Targets at 10,000: command
p99 < 100 ms, controller CPU < 1 core, all registered within 30 s.

Past 10,000 (or with ``--per-node K``) the workers sit behind per-node relays, K to a node: the
controller holds one connection per node (``srljax/system/shell/relay.py``); each node is a real relay
with simulated workers in its process (``bench/relay_nodes.py`` says what is simulated and why). The
targets there: command p99 < 100 ms, controller < 1 core, all registered within 60 s.

File descriptors: each fake worker holds 2 (its socket's mailbox and its TCP connection), the
controller one per worker; every process here raises its soft ``ulimit -n`` to the hard limit and
the bench refuses to start when that is too low (the fix is printed).
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import random
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import zmq  # noqa: E402
from control_costs import isolated_costs, names_latency, percentile  # noqa: E402

from srljax.comm.codec import DecodeError, decode, encode  # noqa: E402
from srljax.comm.control import HANDSHAKE_S, TO_WORKER  # noqa: E402
from srljax.comm.names import DirectoryNames, worker_key  # noqa: E402
from srljax.comm.security import WireRules  # noqa: E402
from srljax.comm.sockets import make_socket  # noqa: E402
from srljax.config import Experiment, apply_overrides, from_dict, load_file, write_json  # noqa: E402
from srljax.layout import CONTROLLER, PARAMS, POLICY, TRAINER, build_layout  # noqa: E402
from srljax.system.shell import auth  # noqa: E402
from srljax.system.shell.bounds import control_limits  # noqa: E402
from srljax.system.shell.fd_limits import raise_open_files  # noqa: E402
from srljax.system.shell.worker import HEARTBEAT_S, STARTUP_HEARTBEAT_S  # noqa: E402
from srljax.types import EnvSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "cartpole_ppo_distributed.py"
SPEC = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=4, batch_size=4,
               max_episode_steps=500)  # what env_spec(cfg) reads from a throw-away env; no envpool here
WARMUP_S = 2.0  # after start, before the steady window: the start replies settle
FDS_PER_FAKE = 2  # the socket's mailbox (eventfd) and its TCP connection
NAMES_RATE = 50.0  # name lookups a second per fake-worker process while the trial runs
TARGETS = {"register_s": 30.0, "command_p99_ms": 100.0, "cpu_cores": 1.0}
TARGETS_RELAYED = {**TARGETS, "register_s": 60.0}  # issue 42, at 100,000
DIRECT_MAX = 10_000  # past this, per-node relays by default
PER_NODE = 1000  # workers per node's relay by default


def raise_fd_limit(needed: int) -> int:
    """The soft open-file limit raised to the hard one (so the table can say it); the fix if too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        raise_open_files(max(needed, hard), "this bench process")
    except OSError as err:
        raise SystemExit(f"{err}; or use more --procs") from None
    return hard


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def thread_times(pid: int, zap_tid: int | None = None) -> dict[str, list[float]]:
    """``{group: [cpu_s, wait_s]}`` summed over the threads of ``pid`` (``/proc/PID/task/*/schedstat``:
    time on a CPU, and time runnable but waiting for one): ``main``, ``zmq`` (libzmq's I/O thread:
    TCP, CURVE handshakes and per-message crypto), ``zap`` (the ZAP handler thread), ``other``."""
    out: dict[str, list[float]] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            cpu_ns, wait_ns = (int(x) for x in (task / "schedstat").read_text().split()[:2])
            comm = (task / "comm").read_text().strip()
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
        tid = int(task.name)
        group = ("main" if tid == pid else "zap" if tid == zap_tid else "zmq" if comm.startswith("ZMQbg/IO")
                 else "other")
        totals = out.setdefault(group, [0.0, 0.0])
        totals[0] += cpu_ns / 1e9
        totals[1] += wait_ns / 1e9
    return out


def phase_line(label: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """What one phase cost: wall seconds, the controller's CPU by thread and its wait for a CPU, the fakes' too."""
    def delta(key: str) -> dict[str, list[float]]:
        return {g: [a - before[key].get(g, [0.0, 0.0])[0], w - before[key].get(g, [0.0, 0.0])[1]]
                for g, (a, w) in after[key].items()}

    ctl, fakes = delta("controller"), delta("fakes")
    wall = after["wall"] - before["wall"]
    cpu = {g: v[0] for g, v in ctl.items()}
    return (f"{label}: {wall:.1f} s wall; controller CPU {sum(cpu.values()):.2f} s (main {cpu.get('main', 0):.2f}, "
            f"zmq I/O {cpu.get('zmq', 0):.2f}, ZAP {cpu.get('zap', 0):.2f}, other {cpu.get('other', 0):.2f}), "
            f"runnable but waiting for a CPU {sum(v[1] for v in ctl.values()):.2f} s (main "
            f"{ctl.get('main', [0, 0])[1]:.2f}); fake workers CPU {sum(v[0] for v in fakes.values()):.2f} s, "
            f"waiting {sum(v[1] for v in fakes.values()):.2f} s")


def bench_config(run_root: Path, workers: int, auth_mode: str, names: str = "controller") -> Experiment:
    policy = max(1, workers // 100)
    cfg = apply_overrides(load_file(CONFIG), [
        "name=control_plane", f"trial=n{workers}-{names}", f"log.run_root={run_root}", "log.wandb=disabled",
        f"layout.num_actors={workers - 1 - policy}", f"layout.num_policy_workers={policy}",
        f"layout.auth={auth_mode}", f"layout.names={names}", "layout.stall_seconds=3600", "timeout_seconds=3600",
    ])
    assert len(build_layout(cfg).workers()) == workers
    return cfg


# -- the controller process -----------------------------------------------------------------------
def connections(workers: int, per_node: int) -> int:
    """What the controller holds: a connection per worker, or per node's relay."""
    return -(-workers // per_node) if per_node else workers


def controller_main(run_dir: Path, seconds: float, ping_rate: float, profile: str, nodes: int) -> None:
    from srljax.system.shell.controller import Controller

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    raise_fd_limit((nodes or len(build_layout(cfg).workers())) + 256)

    class BenchController(Controller):
        """The real controller, timed: phases, heartbeat latency, pings (``status`` round trips), CPU."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.t0 = time.monotonic()  # bound and registered in the name service
            self.marks: dict[str, float] = {}
            self.heartbeat_s: list[float] = []
            self.rtt_s: list[float] = []
            self.pings: dict[int, float] = {}  # nonce -> when sent
            self.ping_keys = list(self.expected)
            random.Random(0).shuffle(self.ping_keys)
            self.sent_pings = 0
            self.window: tuple[float, float] | None = None
            self.cpu: dict[str, float] = {}
            self.next_print = 0.0
            zap = getattr(self.ctx, "zap", None)
            self.zap_tid = zap._thread.native_id if zap is not None else None
            self.snaps: dict[str, dict[str, Any]] = {"bind": self.snapshot()}
            poll = self.server.poll

            def recording_poll(timeout_ms: int | None = 0, accept: Any = None, limit: int | None = None) -> list[Any]:
                msgs = poll(timeout_ms, accept, limit)
                now = time.monotonic()
                measuring = self.window is not None and self.window[0] <= now <= self.window[1]
                for m in msgs:
                    if m.kind == "heartbeat" and measuring and isinstance(m.payload.get("sent"), float):
                        self.heartbeat_s.append(now - m.payload["sent"])
                    elif m.kind == "status" and (sent := self.pings.pop(m.payload.get("ping", -1), None)) is not None:
                        self.rtt_s.append(now - sent)
                return msgs

            self.server.poll = recording_poll  # type: ignore[method-assign]

        def snapshot(self) -> dict[str, Any]:
            """Wall clock, this process's threads' CPU and wait (``thread_times``), and the fakes' totals."""
            fakes = [0.0, 0.0]
            for path in run_dir.glob("fakes-*.pid"):
                for cpu, wait in thread_times(int(path.read_text())).values():
                    fakes[0] += cpu
                    fakes[1] += wait
            return {"wall": time.monotonic(), "controller": thread_times(os.getpid(), self.zap_tid),
                    "fakes": {"all": fakes}}

        def _wait_until(self, keys: list[str], ready: Any, timeout: float, what: str) -> None:
            super()._wait_until(keys, ready, timeout, what)
            self.marks[what] = time.monotonic() - self.t0
            self.snaps[what] = self.snapshot()

        def _tick(self, timeout_ms: int) -> None:
            now = time.monotonic()
            if now >= self.next_print:
                self.next_print = now + 5.0
                print(f"[bench controller] {now - self.t0:5.1f} s: {len(self.info):,} registered, {len(self.ready):,} "
                      f"ready, started: {self._started}, {self.server.counts['received']:,} messages", flush=True)
            if self._started:
                if self.window is None:
                    self.marks["started"] = now - self.t0
                    self.snaps["started"] = self.snapshot()
                    self.cpu["to_start"] = time.process_time()
                    self.window = (now + WARMUP_S, now + WARMUP_S + seconds)
                start, end = self.window
                if now >= start and "window" not in self.cpu:
                    self.cpu["window"] = time.process_time()
                    self.snaps["window"] = self.snapshot()
                if start <= now <= end:
                    due = int((now - start) * ping_rate) - self.sent_pings
                    for _ in range(max(0, due)):
                        key = self.ping_keys[self.sent_pings % len(self.ping_keys)]
                        self.pings[self.sent_pings] = time.monotonic()
                        self.server.send(key, "status", {"ping": self.sent_pings})
                        self.sent_pings += 1
                elif now > end and self.done is None:
                    self.cpu["window"] = (time.process_time() - self.cpu["window"]) / (now - start)
                    self.marks["rss_mb"], self.marks["hwm_mb"] = rss_mb()
                    self.snaps["end"] = self.snapshot()
                    self.done = {"bench": "window over"}
            super()._tick(timeout_ms)

        def stop_all(self, grace_s: float = 30.0) -> list[str]:
            self.snaps["stopping"] = self.snapshot()
            began = time.monotonic()
            late = super().stop_all(grace_s)
            self.marks["stop"] = time.monotonic() - began
            return late

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # the controller stops every worker and returns; stats and profile are kept

    signal.signal(signal.SIGTERM, interrupted)
    keys = auth.load(cfg, run_dir)
    ctl = BenchController(cfg, DirectoryNames(run_dir / "names"), spec=SPEC, keys=keys, verbose=False,
                          connections=nodes or None)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU time: wall time on a crowded box says little
        profiler.enable()
    result = ctl.run()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    out = {"exit_code": result.exit_code, "reason": result.reason, "message": result.message[-3000:],
           "marks": ctl.marks, "cpu_cores": ctl.cpu.get("window") if "rss_mb" in ctl.marks else None,
           "heartbeat_ms": [x * 1e3 for x in ctl.heartbeat_s], "rtt_ms": [x * 1e3 for x in ctl.rtt_s],
           "snaps": ctl.snaps, "pings_sent": ctl.sent_pings, "pings_unanswered": len(ctl.pings), "server": ctl.server.counters()}
    ctl.close()
    (run_dir / "controller.json").write_text(json.dumps(out))


# -- fake worker processes -------------------------------------------------------------------------
class Fake:
    """One light fake worker: a DEALER to the controller, its state, its heartbeat counter, and what
    waits for the connection (``Worker._control_loop``: register and statuses wait, heartbeats do not)."""

    __slots__ = ("key", "role", "index", "sock", "state", "seq", "incarnation", "last_beat", "unsent", "registered",
                 "slot", "due", "ticks")

    def __init__(self, key: str, role: str, index: int, sock: zmq.Socket) -> None:
        self.key, self.role, self.index, self.sock = key, role, index, sock
        self.state, self.seq, self.incarnation, self.last_beat = "created", 0, os.urandom(6).hex(), time.monotonic()
        self.unsent: list[bytes] = []  # encoded messages that must arrive, in order
        self.registered = False
        self.slot, self.due, self.ticks = 0, 0.0, 0  # its place in ``fakes``, its next beat, its clock's ticks


def header_encoder(trial: str) -> Any:
    """``encode(kind, trial, None, meta=...)[0]`` without its generic checks (the fakes' hot path);
    the bytes are checked equal to the codec's once."""
    import msgpack

    from srljax.comm.codec import SCHEMA_VERSION

    def fast(kind: str, meta: dict[str, Any]) -> bytes:
        return msgpack.packb({"kind": kind, "trial": trial, "schema": SCHEMA_VERSION, "version": -1, "meta": meta,
                              "treedef": ["v", None], "arrays": []}, use_bin_type=True)

    probe = {"worker": "a/b/actor/0", "payload": {"state": "running", "seq": 3, "sent": 1.5, "incarnation": "x"}}
    assert [fast("heartbeat", probe)] == encode("heartbeat", trial, None, meta=probe)
    return fast


def fakes_main(run_dir: Path, first: int, count: int) -> None:
    started = time.process_time()
    (run_dir / f"fakes-{first}.pid").write_text(str(os.getpid()))  # the controller reads its CPU and waits
    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    raise_fd_limit(FDS_PER_FAKE * count + 256)
    trial = f"{cfg.name}/{cfg.trial}"
    keys = auth.load(cfg, run_dir)
    ctx = zmq.Context(io_threads=1)
    ctx.set(zmq.MAX_SOCKETS, count + 64)
    commands_limit = control_limits(cfg)["commands"]
    names = DirectoryNames(run_dir / "names")
    controller = worker_key(cfg.name, cfg.trial, CONTROLLER, 0)
    address = names.wait(controller, timeout=300)
    lookups: list[float] = []
    late: list[float] = []  # how late each heartbeat left (this process's own delay)
    fakes: list[Fake] = []
    selector = selectors.EpollSelector()
    counts = {"sent": 0, "beats_not_sent": 0, "received": 0, "dropped": 0, "stopped": 0}
    fast_encode = header_encoder(trial)
    served = cfg.layout.names == "controller"  # names over the control channel, else the folder
    asked: dict[int, tuple[float, list[float]]] = {}  # names request id -> (sent, where its round trip goes)
    names_startup: list[float] = []  # each fake's first name call (its metrics address), as Worker.run makes it
    names_steady: list[float] = []  # gets while running, NAMES_RATE a second per process
    next_name, request_ids = 0.0, itertools.count(1)
    waiting: set[Fake] = set()  # fakes with messages waiting for their connection
    noblock, events, pollin = int(zmq.NOBLOCK), int(zmq.EVENTS), int(zmq.POLLIN)

    def flush(fake: Fake) -> None:
        while fake.unsent:
            try:
                fake.sock.send(fake.unsent[0], flags=noblock, copy=True)
            except zmq.Again:
                waiting.add(fake)
                return
            fake.unsent.pop(0)
            counts["sent"] += 1
            fake.registered = True  # the first one that leaves is its register
        waiting.discard(fake)

    def send(fake: Fake, kind: str, payload: dict[str, Any]) -> None:
        """As ``Worker._control_loop``: a heartbeat goes now or not at all (and only after the
        register); everything else waits, in order, until the connection is up (``ZMQ_IMMEDIATE``)."""
        head = fast_encode(kind, {"worker": fake.key, "payload": {**payload, "incarnation": fake.incarnation}})
        if kind != "heartbeat":
            fake.unsent.append(head)
            flush(fake)
        elif not fake.registered or fake.unsent:
            counts["beats_not_sent"] += 1
        else:
            try:
                fake.sock.send(head, flags=noblock, copy=True)
                counts["sent"] += 1
            except zmq.Again:
                counts["beats_not_sent"] += 1
        drain(fake)  # a send may take the ZMQ_FD's signal for a message that arrived meanwhile

    def name_call(fake: Fake, into: list[float], op: str, **fields: Any) -> None:
        """One name call as ``fake``'s worker makes it: over its control channel (served), or the folder."""
        if served:
            request_id = next(request_ids)
            asked[request_id] = (time.monotonic(), into)
            send(fake, "names", {"op": op, "id": request_id, **fields})
            return
        t = time.monotonic()
        names.add(fields["key"], fields["value"]) if op == "add" else names.get(fields["key"])
        into.append(time.monotonic() - t)

    def answer(fake: Fake, kind: str, payload: dict[str, Any]) -> None:
        if kind == "names_reply":
            sent, into = asked.pop(payload.get("id", -1), (None, None))
            if sent is not None and payload.get("ok"):
                into.append(time.monotonic() - sent)
            return
        if kind == "configure" and fake.state == "created":
            fake.state = "ready"
            serves = {TRAINER: ("samples", PARAMS), POLICY: ("inference",)}.get(fake.role, ())
            addresses = {stream: f"tcp://127.0.0.1:{20000 + fake.index}" for stream in serves}
            send(fake, "status", {"state": "ready", "addresses": addresses,
                                  **({"extras_spec": {}} if fake.role == TRAINER else {})})
            return
        if kind == "start" and fake.state in ("ready", "paused"):
            fake.state = "running"
        elif kind == "stop" and fake.state != "stopped":
            fake.state = "stopped"
            counts["stopped"] += 1
        elif kind in ("peers", "restarts"):
            return
        send(fake, "status", {"state": fake.state, **({"ping": payload["ping"]} if "ping" in payload else {})})

    def drain(fake: Fake) -> None:
        if fake.unsent:  # the signal may be the connection coming up
            flush(fake)
        while fake.sock.getsockopt(events) & pollin:
            frames = fake.sock.recv_multipart(flags=noblock, copy=False)
            counts["received"] += 1
            try:
                msg = decode(frames, trial, TO_WORKER)
                payload = msg.meta["payload"]
            except (DecodeError, KeyError):
                counts["dropped"] += 1
                continue
            answer(fake, msg.kind, payload)

    workers = build_layout(cfg).workers()[first:first + count]
    beats: list[tuple[float, int]] = []
    for i, (role, index) in enumerate(workers):
        t = time.monotonic()
        names.get(controller)  # a real worker's lookup (``Worker.run``); timed, under this start-up load
        lookups.append(time.monotonic() - t)
        sock = make_socket(ctx, zmq.DEALER, sndhwm=10_000, rcvhwm=10_000)
        sock.setsockopt(zmq.MAXMSGSIZE, commands_limit)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # as ControlClient
        sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_S * 1000))
        if keys is not None:
            WireRules(keys=keys, identity=role, pinned={"control": CONTROLLER}).secure_client(sock, "control", address)
        sock.connect(address)
        fake = Fake(worker_key(cfg.name, cfg.trial, role, index), role, index, sock)
        fake.slot = len(fakes)
        fakes.append(fake)
        selector.register(sock.getsockopt(zmq.FD), selectors.EVENT_READ, fake)
        send(fake, "register", {"pid": os.getpid(), "role": role, "index": index, "host": "bench"})
        name_call(fake, names_startup, "add", key=f"{fake.key}/prometheus", value=f"127.0.0.1:{30000 + i}")
        fake.due = time.monotonic()
        heapq.heappush(beats, (fake.due, i))  # the first beat at once, as Worker does
    next_look = 0.0
    while counts["stopped"] < len(fakes):
        now = time.monotonic()
        if now >= next_look:  # the bench gave up (the controller died): do not wait for a stop
            next_look = now + 1.0
            if (run_dir / "abort").exists():
                break
            for fake in list(waiting):  # as a worker's control thread retries (there, every 20 ms)
                flush(fake)
        while beats and beats[0][0] <= now:
            due, i = heapq.heappop(beats)
            fake = fakes[i]
            if fake.state == "stopped":
                continue
            fake.ticks += 1  # as Worker: one 1 s clock; before start only every STARTUP_HEARTBEAT_S-th tick beats
            fake.due = time.monotonic() + HEARTBEAT_S
            heapq.heappush(beats, (fake.due, i))
            if fake.state != "running" and fake.ticks % round(STARTUP_HEARTBEAT_S / HEARTBEAT_S) != 1:
                continue
            fake.seq += 1
            sent = time.monotonic()
            late.append(sent - due)
            send(fake, "heartbeat", {"state": fake.state, "seq": fake.seq, "gap_s": round(sent - fake.last_beat, 3),
                                     "loop_age_s": 0.0, "progress": fake.seq if fake.role == TRAINER else 0,
                                     "waiting": "", "sent": sent})
            fake.last_beat = sent
        if now >= next_name and fakes[0].state == "running":  # lookups while the trial runs
            next_name = now + 1.0 / NAMES_RATE
            fake, other = random.choice(fakes), random.choice(fakes)
            if len(asked) < 100:  # not more in flight than a worker or two would have
                name_call(fake, names_steady, "get", key=f"{other.key}/prometheus")
        timeout = min(0.05, max(0.0, beats[0][0] - time.monotonic())) if beats else 0.05
        for key, _ in selector.select(timeout):
            drain(key.data)
    for fake in fakes:
        fake.sock.close(linger=1000)
    ctx.term()
    out = {"cpu_s": time.process_time() - started, "lookup_ms": [x * 1e3 for x in lookups],
           "names_startup_ms": [x * 1e3 for x in names_startup], "names_steady_ms": [x * 1e3 for x in names_steady],
           "late_p99_ms": percentile(late, 99) * 1e3, **counts}
    (run_dir / f"fakes-{first}.json").write_text(json.dumps(out))


# -- one N ------------------------------------------------------------------------------------------
def run_one(workers: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    procs = max(1, min(args.procs, workers // 50))
    cfg = bench_config(root, workers, args.auth, args.names)
    cfg = auth.resolved(cfg, slurm=False)
    run_dir = cfg.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(cfg, run_dir / "config.json")
    auth.prepare(cfg, run_dir)
    (run_dir / "names").mkdir(exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    per_node = args.per_node if args.per_node is not None else PER_NODE if workers > DIRECT_MAX else 0
    nodes = connections(workers, per_node) if per_node else 0
    if nodes:  # simulated nodes: a real relay each, their workers in its process (bench/relay_nodes.py)
        from relay_nodes import start

        leader, procs = start(run_dir, nodes, per_node, args.procs)
        fakes = [leader]
    else:
        share = -(-workers // procs)
        fakes = [subprocess.Popen([*me, "_fakes", str(run_dir), str(first), str(min(share, workers - first))])
                 for first in range(0, workers, share)]
    deadline = time.monotonic() + 600  # their imports (slow on a crowded box), so they wait for the controller
    while len(list(run_dir.glob("fakes-*.pid"))) < (procs if nodes else len(fakes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    ctl_cmd = [*me, "_controller", str(run_dir), str(args.seconds), str(args.ping_rate), args.profile or "", str(nodes),
               str(args.controller_nice)]
    # its own session, as the simulated nodes' (other machines): with autogroups on (Linux's default) the CPU is
    # shared between sessions first, and in the bench's session the controller had a fifth of that share
    ctl = subprocess.Popen(ctl_cmd, start_new_session=bool(nodes))
    ok = True
    try:
        ctl.wait(timeout=args.limit)
    except subprocess.TimeoutExpired:
        ok = False
        ctl.terminate()  # it stops the workers and writes what it measured
        try:
            ctl.wait(timeout=90)
        except subprocess.TimeoutExpired:
            ctl.kill()
            ctl.wait()
    (run_dir / "abort").touch()
    for proc in fakes:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not (run_dir / "controller.json").exists():
        raise SystemExit(f"N={workers}: the controller did not finish within {args.limit} s (see above)")
    if not ok:
        print(f"N={workers}: the controller did not finish within {args.limit} s; what it measured until then:")
    got = json.loads((run_dir / "controller.json").read_text())
    fake_stats = [json.loads(p.read_text()) for p in run_dir.glob("fakes-*.json")]
    got["fake_cpu_s"] = sum(f["cpu_s"] for f in fake_stats)
    got["fake_beats_not_sent"] = sum(f["beats_not_sent"] for f in fake_stats)
    got["fake_late_p99_ms"] = max((f["late_p99_ms"] for f in fake_stats), default=float("nan"))
    got["lookup_ms"] = [x for f in fake_stats for x in f["lookup_ms"]]
    got["names_startup_ms"] = [x for f in fake_stats for x in f["names_startup_ms"]]
    got["names_steady_ms"] = [x for f in fake_stats for x in f["names_steady_ms"]]
    got["names_mode"] = args.names
    got["nodes"], got["per_node"] = nodes, per_node
    got["relays"] = {k: sum(f.get("relays", {}).get(k, 0) for f in fake_stats)
                     for k in ("batches", "forwarded", "undelivered", "heartbeats_dropped")}
    got["names"] = names_latency(workers, root / f"names-{workers}")
    got["procs"] = procs
    return got


def report_row(n: int, r: dict[str, Any]) -> str:
    m, hb, rtt = r["marks"], r["heartbeat_ms"], r["rtt_ms"]
    names = r["names"]
    cpu = r["cpu_cores"]
    return (f"{n:>6,} | {m.get('register', float('nan')):7.1f} | {m.get('configure actor', float('nan')):8.1f} | "
            f"{percentile(hb, 50):6.1f} / {percentile(hb, 99):6.1f} | {percentile(rtt, 50):6.1f} / {percentile(rtt, 99):6.1f} | "
            f"{cpu if cpu is not None else float('nan'):5.2f} | {m.get('rss_mb', float('nan')):6.0f} | "
            f"{m.get('stop', float('nan')):5.1f} | "
            f"{names['memory']['get_p50_us']:4.1f} / {names['memory']['get_p99_us']:4.1f} | "
            f"{names['directory']['get_p50_us']:5.0f} / {names['directory']['get_p99_us']:5.0f} / "
            f"{names['directory']['list_ms']:6.1f} / {names['memory']['list_ms']:5.2f} | "
            f"{percentile(r['lookup_ms'], 50):5.2f} / {percentile(r['lookup_ms'], 99):6.2f} | {r['names_mode']}: "
            f"{percentile(r['names_startup_ms'], 50):6.1f} / {percentile(r['names_startup_ms'], 99):7.1f}, "
            f"{percentile(r['names_steady_ms'], 50):5.2f} / {percentile(r['names_steady_ms'], 99):6.2f} "
            f"({len(r['names_steady_ms'])})" + (f" | {r['nodes']:,} relays" if r["nodes"] else ""))


HEADER = ("     N | reg s | conf s | heartbeat p50/p99 ms | command p50/p99 ms | CPU | RSS MB | stop s | "
          "memory get p50/p99 µs | folder get p50/p99 µs / folder list ms / memory list ms | controller address "
          "from the folder p50/p99 ms | the trial's names: first call (start-up) p50/p99 ms, get while running "
          "p50/p99 ms (count)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="100,1000,10000", help="comma-separated N")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady state measured per N")
    parser.add_argument("--ping-rate", type=float, default=200.0, help="status round trips per second")
    parser.add_argument("--procs", type=int, default=4, help="fake-worker processes (at most one per 50 workers)")
    parser.add_argument("--per-node", type=int, default=None,
                        help=f"workers behind each node's relay (0: each worker connects to the controller; "
                             f"default: {PER_NODE} past {DIRECT_MAX:,} workers, else 0)")
    parser.add_argument("--auth", choices=("on", "off"), default="on")
    parser.add_argument("--names", choices=("controller", "folder"), default="controller",
                        help="layout.names of the trial: the workers' name calls go to the controller or the run folder")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds one N may take")
    parser.add_argument("--profile", default="", help="write the controller's cProfile stats here")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    parser.add_argument("--no-isolated", action="store_true", help="skip the isolated-cost line (quicker reruns)")
    parser.add_argument("--controller-nice", type=int, default=0,
                        help="niceness of the controller process (below 0 needs root): on a crowded box, what the "
                             "controller costs as if it had its own core, the fakes standing in for other machines")
    args = parser.parse_args()
    from machine import describe

    sizes = [int(n) for n in args.workers.split(",")]
    hard = raise_fd_limit(min(max(sizes), DIRECT_MAX) + 256)  # what this process and the direct fakes hold
    print(describe())
    print(f"ulimit -n {hard:,} (soft raised to hard); layout.auth={args.auth}; heartbeat every {HEARTBEAT_S:g} s; "
          f"{args.seconds:g} s steady state, {args.ping_rate:g} status round trips/s; layout.names={args.names}; "
          f"controller niceness {args.controller_nice}")
    costs = {} if args.no_isolated else isolated_costs()
    if costs:
        print(f"in isolation (CPU of one process, all threads): a heartbeat through ControlServer.poll "
              f"{costs['poll_us_auth_off']:.0f} µs (CURVE on: {costs['poll_us_auth_on']:.0f} µs); a connection with its "
              f"first message, both ends: {costs['handshake_us_auth_off']:.0f} µs (CURVE on: "
              f"{costs['handshake_us_auth_on']:.0f} µs)", flush=True)
    root = Path(tempfile.mkdtemp(prefix="srljax-control-plane-"))
    rows = []
    try:
        for n in sizes:
            r = run_one(n, args, root)
            if r["exit_code"] != 0 or r["cpu_cores"] is None:
                print(f"N={n}: the trial did not reach its steady window: {r['reason']}: {r['message']}")
            rows.append((n, r))
            print(f"N={n:,}: {len(r['heartbeat_ms']):,} heartbeats, {len(r['rtt_ms']):,} round trips "
                  f"({r['pings_unanswered']} unanswered), fake workers in {r['procs']} processes used "
                  f"{r['fake_cpu_s']:.1f} CPU s, {r['fake_beats_not_sent']:,} heartbeats not sent (no connection yet), beats left up to "
                  f"{r['fake_late_p99_ms']:.0f} ms late (p99); controller socket {r['server']}"
                  + (f"; {r['nodes']:,} nodes' relays of {r['per_node']:,} workers: {r['relays']} (heartbeat latency: "
                     f"whole beats only; a beat that says nothing new reaches the controller as a sign of life "
                     f"without its send time)" if r["nodes"] else ""),
                  flush=True)
            snaps = r["snaps"]
            phases = [("register", "bind", "register"), ("configure and start", "register", "started"),
                      ("steady window", "window", "end")] if "register" in snaps else [
                ("until the bench stopped it", "bind", "stopping")]
            for label, a, b in phases:
                if a in snaps and b in snaps:
                    print(f"  {label}: {phase_line(label, snaps[a], snaps[b]).split(': ', 1)[1]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(HEADER)
    for n, r in rows:
        print(report_row(n, r))
    for n, r in rows:
        if n >= 10_000:
            checks = {"register_s": r["marks"].get("register", float("inf")),
                      "command_p99_ms": percentile(r["rtt_ms"], 99), "cpu_cores": r["cpu_cores"] or float("inf")}
            goal = TARGETS_RELAYED if r["nodes"] else TARGETS
            print(f"targets at N={n:,}" + (f" ({r['nodes']:,} relays)" if r["nodes"] else "") + ": " + ", ".join(
                f"{k} {v:.2f} {'<' if v < goal[k] else 'MISSES'} {goal[k]:g}" for k, v in checks.items()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_controller":
        os.nice(int(sys.argv[7]))
        controller_main(Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_fakes":
        if os.environ.get("BENCH_PROFILE_FAKES"):  # a cProfile of each fake-worker process, CPU time
            import cProfile

            fake_profiler = cProfile.Profile(time.process_time)
            fake_profiler.runcall(fakes_main, Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
            fake_profiler.dump_stats(f"{os.environ['BENCH_PROFILE_FAKES']}.{sys.argv[3]}")
        else:
            fakes_main(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
