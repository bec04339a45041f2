"""The control plane at scale: the real controller against 100, 1,000 and 10,000 light fake workers.

    python bench/control_plane.py                        # N = 100, 1,000, 10,000; 10 s of steady state each
    python bench/control_plane.py --workers 1000 --seconds 20 --procs 2 --auth off
    python bench/control_plane.py --workers 10000 --profile /tmp/controller.prof   # cProfile of the controller

For each N: a CartPole remote-inference layout (1 trainer, N/100 policy workers, the rest actors),
``layout.auth=on`` with the trial's keys in a fresh run folder, the **real** ``Controller``
(``srljax/system/controller.py``) in its own process, found through the shared-folder name service
(``DirectoryNames``) as ``launch.local`` workers find it, and N fake workers spread over ``--procs``
processes. Each fake worker owns one DEALER with its role's CURVE key pair pinned to the
controller's key (so the controller's ZAP handler and sender check run as for real workers) and
speaks the worker protocol of ``srljax/system/worker.py``: register, a heartbeat every second
(``HEARTBEAT_S``), ``status ready`` on ``configure`` (servers report addresses, so later
configures carry peers), ``status`` on ``start`` and on any ``status`` command, ``stopped`` on ``stop``.
A process drives its workers from one epoll loop on the sockets' ``ZMQ_FD``.

Printed per N: seconds until all registered and all configured (from the controller's bind),
p50/p99 heartbeat latency (a beat's send to the controller's poll returning it; CLOCK_MONOTONIC is
system-wide), p50/p99 command round trip (the controller sends ``status`` to ``--ping-rate``
workers a second, round robin; a fake answers at once, so this is the controller and transport's
share: a real worker's control thread adds up to its 20 ms receive slice), the controller
process's CPU (cores, all its threads, over the steady window) and RSS, seconds to stop all, and
name-service lookups with N entries: ``get`` p50/p99 and one ``list`` of a role, for
``MemoryNames`` and ``DirectoryNames``. Targets at 10,000: command p99 < 100 ms, controller CPU
< 1 core, all registered within 30 s.

File descriptors: each fake worker holds 2 (its socket's mailbox and its TCP connection), the
controller one per worker; every process here raises its soft ``ulimit -n`` to the hard limit and
the bench refuses to start when that is too low (the fix is printed).
"""

from __future__ import annotations

import argparse
import heapq
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

from srljax.comm.codec import DecodeError, decode, encode  # noqa: E402
from srljax.comm.control import TO_WORKER  # noqa: E402
from srljax.comm.names import DirectoryNames, MemoryNames, NameResolver, worker_key  # noqa: E402
from srljax.comm.security import WireRules  # noqa: E402
from srljax.comm.sockets import make_socket  # noqa: E402
from srljax.config import Experiment, apply_overrides, from_dict, load_file, write_json  # noqa: E402
from srljax.layout import CONTROLLER, PARAMS, POLICY, TRAINER, build_layout  # noqa: E402
from srljax.system import auth  # noqa: E402
from srljax.system.bounds import control_limits  # noqa: E402
from srljax.system.fd_limits import raise_open_files  # noqa: E402
from srljax.system.worker import HEARTBEAT_S  # noqa: E402
from srljax.types import EnvSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "cartpole_ppo_distributed.py"
SPEC = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=4, batch_size=4,
               max_episode_steps=500)  # what env_spec(cfg) reads from a throw-away env; no envpool here
WARMUP_S = 2.0  # after start, before the steady window: the start replies settle
FDS_PER_FAKE = 2  # the socket's mailbox (eventfd) and its TCP connection
TARGETS = {"register_s": 30.0, "command_p99_ms": 100.0, "cpu_cores": 1.0}


def raise_fd_limit(needed: int) -> int:
    """The soft open-file limit raised to the hard one (so the table can say it); the fix if too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        raise_open_files(max(needed, hard), "this bench process")
    except OSError as err:
        raise SystemExit(f"{err}; or use more --procs") from None
    return hard


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def bench_config(run_root: Path, workers: int, auth_mode: str) -> Experiment:
    policy = max(1, workers // 100)
    cfg = apply_overrides(load_file(CONFIG), [
        "name=control_plane", f"trial=n{workers}", f"log.run_root={run_root}", "log.wandb=disabled",
        f"layout.num_actors={workers - 1 - policy}", f"layout.num_policy_workers={policy}",
        f"layout.auth={auth_mode}", "layout.stall_seconds=3600", "timeout_seconds=3600",
    ])
    assert len(build_layout(cfg).workers()) == workers
    return cfg


# -- the controller process -----------------------------------------------------------------------
def controller_main(run_dir: Path, seconds: float, ping_rate: float, profile: str) -> None:
    from srljax.system.controller import Controller

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    raise_fd_limit(len(build_layout(cfg).workers()) + 256)

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

        def _wait_until(self, keys: list[str], ready: Any, timeout: float, what: str) -> None:
            super()._wait_until(keys, ready, timeout, what)
            self.marks[what] = time.monotonic() - self.t0

        def _tick(self, timeout_ms: int) -> None:
            now = time.monotonic()
            if now >= self.next_print:
                self.next_print = now + 5.0
                print(f"[bench controller] {now - self.t0:5.1f} s: {len(self.info):,} registered, {len(self.ready):,} "
                      f"ready, started: {self._started}, {self.server.counts['received']:,} messages", flush=True)
            if self._started:
                if self.window is None:
                    self.marks["started"] = now - self.t0
                    self.cpu["to_start"] = time.process_time()
                    self.window = (now + WARMUP_S, now + WARMUP_S + seconds)
                start, end = self.window
                if now >= start and "window" not in self.cpu:
                    self.cpu["window"] = time.process_time()
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
                    self.done = {"bench": "window over"}
            super()._tick(timeout_ms)

        def stop_all(self, grace_s: float = 30.0) -> list[str]:
            began = time.monotonic()
            late = super().stop_all(grace_s)
            self.marks["stop"] = time.monotonic() - began
            return late

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # the controller stops every worker and returns; stats and profile are kept

    signal.signal(signal.SIGTERM, interrupted)
    keys = auth.load(cfg, run_dir)
    ctl = BenchController(cfg, DirectoryNames(run_dir / "names"), spec=SPEC, keys=keys, verbose=False)
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
           "pings_sent": ctl.sent_pings, "pings_unanswered": len(ctl.pings), "server": ctl.server.counters()}
    ctl.close()
    (run_dir / "controller.json").write_text(json.dumps(out))


# -- fake worker processes -------------------------------------------------------------------------
class Fake:
    """One light fake worker: a DEALER to the controller, its state, its heartbeat counter."""

    __slots__ = ("key", "role", "index", "sock", "state", "seq", "incarnation", "last_beat")

    def __init__(self, key: str, role: str, index: int, sock: zmq.Socket) -> None:
        self.key, self.role, self.index, self.sock = key, role, index, sock
        self.state, self.seq, self.incarnation, self.last_beat = "created", 0, os.urandom(6).hex(), time.monotonic()


def fakes_main(run_dir: Path, first: int, count: int) -> None:
    started = time.process_time()
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
    counts = {"sent": 0, "send_full": 0, "received": 0, "dropped": 0, "stopped": 0}

    def send(fake: Fake, kind: str, payload: dict[str, Any]) -> None:
        frames = encode(kind, trial, None, meta={"worker": fake.key,
                                                 "payload": {**payload, "incarnation": fake.incarnation}})
        try:
            fake.sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            counts["sent"] += 1
        except zmq.Again:
            counts["send_full"] += 1
        drain(fake)  # a send may take the ZMQ_FD's signal for a message that arrived meanwhile

    def answer(fake: Fake, kind: str, payload: dict[str, Any]) -> None:
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
        while fake.sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            frames = fake.sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
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
        if keys is not None:
            WireRules(keys=keys, identity=role, pinned={"control": CONTROLLER}).secure_client(sock, "control", address)
        sock.connect(address)
        fake = Fake(worker_key(cfg.name, cfg.trial, role, index), role, index, sock)
        fakes.append(fake)
        selector.register(sock.getsockopt(zmq.FD), selectors.EVENT_READ, fake)
        send(fake, "register", {"pid": os.getpid(), "role": role, "index": index, "host": "bench"})
        heapq.heappush(beats, (time.monotonic(), i))  # the first beat at once, as Worker does
    next_look = 0.0
    while counts["stopped"] < len(fakes):
        now = time.monotonic()
        if now >= next_look:  # the bench gave up (the controller died): do not wait for a stop
            next_look = now + 1.0
            if (run_dir / "abort").exists():
                break
        while beats and beats[0][0] <= now:
            due, i = heapq.heappop(beats)
            fake = fakes[i]
            if fake.state == "stopped":
                continue
            fake.seq += 1
            sent = time.monotonic()
            late.append(sent - due)
            send(fake, "heartbeat", {"state": fake.state, "seq": fake.seq, "gap_s": round(sent - fake.last_beat, 3),
                                     "loop_age_s": 0.0, "progress": fake.seq if fake.role == TRAINER else 0,
                                     "waiting": "", "sent": sent})
            fake.last_beat = sent
            heapq.heappush(beats, (sent + HEARTBEAT_S, i))
        timeout = min(0.05, max(0.0, beats[0][0] - time.monotonic())) if beats else 0.05
        for key, _ in selector.select(timeout):
            drain(key.data)
    for fake in fakes:
        fake.sock.close(linger=1000)
    ctx.term()
    out = {"cpu_s": time.process_time() - started, "lookup_ms": [x * 1e3 for x in lookups],
           "late_p99_ms": percentile(late, 99) * 1e3, **counts}
    (run_dir / f"fakes-{first}.json").write_text(json.dumps(out))


# -- the name service alone -------------------------------------------------------------------------
def names_latency(workers: int, folder: Path, samples: int = 2000) -> dict[str, dict[str, float]]:
    """``get`` p50/p99 (µs) and one ``list`` of the policy role (ms) with one entry per worker."""
    keys = [f"control_plane/n{workers}/{role}/{index}/control" for role, index in
            [("trainer", 0)] + [("policy", i) for i in range(max(1, workers // 100))] +
            [("actor", i) for i in range(workers - 1 - max(1, workers // 100))]]
    out = {}
    backends: list[tuple[str, NameResolver]] = [("memory", MemoryNames()), ("directory", DirectoryNames(folder))]
    for label, names in backends:
        for key in keys:
            names.add(key, "tcp://127.0.0.1:5555")
        picks = random.Random(1).choices(keys, k=samples)
        times = []
        for key in picks:
            t = time.perf_counter()
            names.get(key)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        listed = names.list(f"control_plane/n{workers}/policy/")
        list_ms = (time.perf_counter() - t) * 1e3
        assert len(listed) == max(1, workers // 100)
        out[label] = {"get_p50_us": percentile(times, 50) * 1e6, "get_p99_us": percentile(times, 99) * 1e6,
                      "list_ms": list_ms}
    return out


# -- CPU costs in isolation (what the crowded box does not distort) -------------------------------------
def isolated_costs(connections: int = 500, messages: int = 20_000) -> dict[str, float]:
    """CPU µs (all threads of this process) per heartbeat through ``ControlServer.poll`` and per
    connection handshake (both ends, here in one process), with CURVE and without."""
    from srljax.comm import ControlClient, ControlServer
    from srljax.comm.security import KeyRing, WireContext

    out = {}
    for label in ("off", "on"):
        keys = KeyRing.generate([CONTROLLER, "actor"]) if label == "on" else None
        server_ctx = WireContext(WireRules(keys=keys, identity=CONTROLLER, limits={"control": 256 << 10}))
        client_ctx = WireContext(WireRules(keys=keys, identity="actor", pinned={"control": CONTROLLER}))
        client_ctx.set(zmq.MAX_SOCKETS, connections + 64)
        server = ControlServer("tcp://127.0.0.1:*", "bench/t0", ctx=server_ctx)
        one = ControlClient(server.address, "bench/t0", "bench/t0/actor/0", ctx=client_ctx)
        for seq in range(messages):
            one.send("heartbeat", {"state": "running", "seq": seq, "gap_s": 1.0, "loop_age_s": 0.0, "progress": 0,
                                   "waiting": "", "sent": time.monotonic(), "incarnation": "0123456789ab"}, timeout_ms=None)
        time.sleep(2.0)  # all sent and queued at the server
        began, got = time.process_time(), 0
        while got < messages:
            got += len(server.poll(timeout_ms=1000, limit=1000))
        out[f"poll_us_auth_{label}"] = (time.process_time() - began) / messages * 1e6
        began = time.process_time()
        socks = []
        for _ in range(connections):  # the same rules a worker's socket gets, without the monitor
            sock = make_socket(client_ctx, zmq.DEALER)
            client_ctx.rules.secure_client(sock, "control", server.address)
            sock.connect(server.address)
            sock.send_multipart(encode("register", "bench/t0", None, meta={"worker": "bench/t0/actor/1", "payload": {}}))
            socks.append(sock)
        got = 0
        while got < connections and server.sock.poll(60_000):
            server.sock.recv_multipart()
            got += 1
        out[f"handshake_us_auth_{label}"] = (time.process_time() - began) / connections * 1e6
        for sock in socks:
            sock.close(linger=0)
        one.close()
        server.close()
        server_ctx.close()
        client_ctx.close()
    return out


# -- one N ------------------------------------------------------------------------------------------
def run_one(workers: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    procs = max(1, min(args.procs, workers // 50))
    cfg = bench_config(root, workers, args.auth)
    cfg = auth.resolved(cfg, slurm=False)
    run_dir = cfg.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(cfg, run_dir / "config.json")
    auth.prepare(cfg, run_dir)
    (run_dir / "names").mkdir(exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    share = -(-workers // procs)
    fakes = [subprocess.Popen([*me, "_fakes", str(run_dir), str(first), str(min(share, workers - first))])
             for first in range(0, workers, share)]
    time.sleep(1.0 + 0.2 * procs)  # their imports, so they are waiting for the controller when it binds
    ctl_cmd = [*me, "_controller", str(run_dir), str(args.seconds), str(args.ping_rate), args.profile or ""]
    ctl = subprocess.Popen(ctl_cmd)
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
    got["fake_send_full"] = sum(f["send_full"] for f in fake_stats)
    got["fake_late_p99_ms"] = max((f["late_p99_ms"] for f in fake_stats), default=float("nan"))
    got["lookup_ms"] = [x for f in fake_stats for x in f["lookup_ms"]]
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
            f"{names['directory']['list_ms']:6.1f} | {percentile(r['lookup_ms'], 50):5.2f} / {percentile(r['lookup_ms'], 99):5.2f}")


HEADER = ("     N | reg s | conf s | heartbeat p50/p99 ms | command p50/p99 ms | CPU | RSS MB | stop s | "
          "memory get p50/p99 µs | folder get p50/p99 µs / list ms | start-up lookup p50/p99 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="100,1000,10000", help="comma-separated N")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady state measured per N")
    parser.add_argument("--ping-rate", type=float, default=200.0, help="status round trips per second")
    parser.add_argument("--procs", type=int, default=4, help="fake-worker processes (at most one per 50 workers)")
    parser.add_argument("--auth", choices=("on", "off"), default="on")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds one N may take")
    parser.add_argument("--profile", default="", help="write the controller's cProfile stats here")
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    args = parser.parse_args()
    from machine import describe

    sizes = [int(n) for n in args.workers.split(",")]
    hard = raise_fd_limit(max(sizes) + 256)
    print(describe())
    print(f"ulimit -n {hard:,} (soft raised to hard); layout.auth={args.auth}; heartbeat every {HEARTBEAT_S:g} s; "
          f"{args.seconds:g} s steady state, {args.ping_rate:g} status round trips/s")
    costs = isolated_costs()
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
                  f"{r['fake_cpu_s']:.1f} CPU s, {r['fake_send_full']} sends refused, beats left up to "
                  f"{r['fake_late_p99_ms']:.0f} ms late (p99); controller socket {r['server']}",
                  flush=True)
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
            print(f"targets at N={n:,}: " + ", ".join(
                f"{k} {v:.2f} {'<' if v < TARGETS[k] else 'MISSES'} {TARGETS[k]:g}" for k, v in checks.items()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_controller":
        controller_main(Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "_fakes":
        fakes_main(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
