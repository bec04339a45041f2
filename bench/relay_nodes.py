"""Simulated nodes for ``bench/control_plane.py --per-node K``: each a real relay and K in-process workers.

    python bench/control_plane.py --workers 100000                 # 100 nodes of 1,000 (the default past 10,000)
    python bench/control_plane.py --workers 10000 --per-node 500   # 20 nodes of 500

A node here is the relay of ``srljax/system/shell/relay.py`` (the class real runs start per node) with
its upward leg as in a real run: one DEALER to the real controller with the trial's ``relay`` key
(CURVE, ZAP and the sender check as for real), carrying the node's messages in ``relay`` batches and
taking commands and fan-outs back. Its downward leg, the node's own workers on their node-local
sockets, is replaced by K simulated workers in the same process, fed to the relay's ``forward`` and
answered from its ``deliver``: on a real cluster that leg costs each node's CPU, not the
controller's, and 100,000 worker sockets (200,000 file descriptors, 100,000 messages a second
through pyzmq) do not fit beside the controller on one 2-core machine. ``tests/test_relay.py`` runs
the downward leg over real sockets with real workers. Each simulated worker speaks the protocol of
``srljax/system/shell/worker.py`` as the bench's direct fakes do (``control_plane.fakes_main``):
register and add its metrics name at start, a heartbeat every ``HEARTBEAT_S`` once running (every
``STARTUP_HEARTBEAT_S`` before) on one clock started at a random phase, ``status ready`` with its
addresses on ``configure``, ``status`` on ``start`` and on any ``status`` (the bench's pings),
``stopped`` on ``stop``, and ``NAMES_RATE`` name lookups a second per process while running. Nodes are
spread over ``--procs`` processes, each driving its relays from one loop, all in one session of their
own (``start``): with autogroups on, Linux shares the CPU between sessions first, so the simulated
nodes together get one session's share, as does the controller, rather than one per process.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zmq  # noqa: E402

from srljax.comm import ControlMessage, DirectoryNames, worker_key  # noqa: E402
from srljax.comm.control import RELAY  # noqa: E402
from srljax.config import from_dict  # noqa: E402
from srljax.layout import CONTROLLER, PARAMS, POLICY, TRAINER, build_layout  # noqa: E402
from srljax.system.shell import auth  # noqa: E402
from srljax.system.shell.auth import worker_context  # noqa: E402
from srljax.system.shell.relay import FLUSH_S, Relay  # noqa: E402
from srljax.system.shell.worker import HEARTBEAT_S, STARTUP_HEARTBEAT_S  # noqa: E402

BEATS_PER_TURN = 250
TICK_S = 0.005  # one slot of the heartbeat clock: the beats of a slot leave together (up to this late)
SLOTS = round(HEARTBEAT_S / TICK_S)
NAMES_RATE = 50.0  # name lookups a second per process while running (as control_plane.NAMES_RATE)


class Sim:
    """One simulated worker behind a relay: its key, state, heartbeat counter and clock."""

    __slots__ = ("key", "role", "index", "node", "state", "seq", "incarnation", "last_beat", "ticks", "beat", "msg")

    def __init__(self, key: str, role: str, index: int, node: SimNode) -> None:
        self.key, self.role, self.index, self.node = key, role, index, node
        self.state, self.seq, self.incarnation, self.last_beat, self.ticks = "created", 0, os.urandom(6).hex(), 0.0, 0
        # its heartbeat, refilled for each beat (the relay packs a whole one as it takes it, and keeps none)
        self.beat = {"state": "", "seq": 0, "gap_s": 0.0, "loop_age_s": 0.0, "progress": 0, "waiting": "", "sent": 0.0,
                     "incarnation": self.incarnation}
        self.msg = ControlMessage("heartbeat", key, self.beat)


class SimNode(Relay):
    """The real relay, its workers simulated in this process: ``deliver`` answers for them."""

    def __init__(self, *args: Any, bench: NodesProcess, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bench = bench
        self.sims: dict[str, Sim] = {}

    def deliver(self, worker: str, kind: str, payload: dict[str, Any]) -> None:
        sim = self.sims.get(worker)
        if sim is None:
            self.counts["undelivered"] += 1
            return
        self.bench.answer(sim, kind, payload)


class NodesProcess:
    """One process's nodes and the loop that drives them."""

    def __init__(self, run_dir: Path, first_node: int, nodes: int, per_node: int) -> None:
        self.started = time.process_time()
        self.run_dir = run_dir
        (run_dir / f"fakes-n{first_node}.pid").write_text(str(os.getpid()))  # the controller reads its CPU
        self.first = first_node
        cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
        keys = auth.load(cfg, run_dir)
        self.names = DirectoryNames(run_dir / "names")
        t = time.monotonic()
        address = self.names.wait(worker_key(cfg.name, cfg.trial, CONTROLLER, 0), timeout=300)
        self.lookup_ms = [(time.monotonic() - t) * 1e3]  # one lookup per node process (a relay's), not per worker
        self.ctx = worker_context(cfg, keys, RELAY)  # one context for this process's relays (a real relay has its own)
        self.ctx.set(zmq.MAX_SOCKETS, nodes + 64)
        self.served = cfg.layout.names == "controller"
        self.counts = {"sent": 0, "beats_not_sent": 0, "received": 0, "stopped": 0}
        self.asked: dict[int, tuple[float, list[float]]] = {}
        self.names_startup: list[float] = []
        self.names_steady: list[float] = []
        self.request_ids = itertools.count(1)
        self.late: list[float] = []
        self.beat_cpu = 0.0  # CPU seconds of this process's main thread spent making heartbeats and relaying them
        workers = build_layout(cfg).workers()
        self.nodes: list[SimNode] = []
        self.sims: list[Sim] = []
        self.wheel: list[list[Sim]] = [[] for _ in range(SLOTS)]  # each sim's beat slot: its clock's phase
        rng = random.Random(first_node)
        self.epoch = time.monotonic()
        for n in range(first_node, first_node + nodes):
            node = SimNode(cfg, f"node{n}", address, keys=keys, up_ctx=self.ctx, bench=self)
            self.nodes.append(node)
            for role, index in workers[n * per_node:(n + 1) * per_node]:
                sim = Sim(worker_key(cfg.name, cfg.trial, role, index), role, index, node)
                node.sims[sim.key] = sim
                self.sims.append(sim)
                # as a worker process starts: register, add its metrics name; its clock's phase at random
                self.send(sim, "register", {"pid": os.getpid(), "role": role, "index": index, "host": f"node{n}"})
                self.name_call(sim, self.names_startup, "add", key=f"{sim.key}/prometheus",
                               value=f"127.0.0.1:{30000 + index % 30000}")
                self.wheel[rng.randrange(SLOTS)].append(sim)
        self.next_slot = 0  # the wheel's next slot to beat, counted from ``epoch``
        self.poller = zmq.Poller()
        for node in self.nodes:
            node.poller = zmq.Poller()  # unused: this loop polls every node's socket at once
            self.poller.register(node.up.sock, zmq.POLLIN)

    def send(self, sim: Sim, kind: str, payload: dict[str, Any]) -> None:
        """What a worker's control thread sends, as the relay's downward socket would hand it on."""
        payload["incarnation"] = sim.incarnation
        sim.node.forward(ControlMessage(kind, sim.key, payload))
        self.counts["sent"] += 1

    def name_call(self, sim: Sim, into: list[float], op: str, **fields: Any) -> None:
        if self.served:
            request_id = next(self.request_ids)
            self.asked[request_id] = (time.monotonic(), into)
            self.send(sim, "names", {"op": op, "id": request_id, **fields})
            return
        t = time.monotonic()
        self.names.add(fields["key"], fields["value"]) if op == "add" else self.names.get(fields["key"])
        into.append(time.monotonic() - t)

    def answer(self, sim: Sim, kind: str, payload: dict[str, Any]) -> None:
        """As ``control_plane.fakes_main``'s ``answer``: what a worker says to each command."""
        self.counts["received"] += 1
        if kind == "names_reply":
            sent, into = self.asked.pop(payload.get("id", -1), (None, None))
            if sent is not None and payload.get("ok"):
                into.append(time.monotonic() - sent)
            return
        if kind == "configure" and sim.state == "created":
            sim.state = "ready"
            serves = {TRAINER: ("samples", PARAMS), POLICY: ("inference",)}.get(sim.role, ())
            addresses = {stream: f"tcp://127.0.0.1:{20000 + sim.index}" for stream in serves}
            self.send(sim, "status", {"state": "ready", "addresses": addresses,
                                      **({"extras_spec": {}} if sim.role == TRAINER else {})})
            return
        if kind == "start" and sim.state in ("ready", "paused"):
            sim.state = "running"
        elif kind == "stop" and sim.state != "stopped":
            sim.state = "stopped"
            self.counts["stopped"] += 1
        elif kind in ("peers", "restarts"):
            return
        self.send(sim, "status", {"state": sim.state, **({"ping": payload["ping"]} if "ping" in payload else {})})

    def run(self) -> None:
        next_look = next_name = 0.0
        startup_ticks = round(STARTUP_HEARTBEAT_S / HEARTBEAT_S)
        while self.counts["stopped"] < len(self.sims):
            now = time.monotonic()
            if now >= next_look:
                next_look = now + 1.0
                if (self.run_dir / "abort").exists():  # the bench gave up: do not wait for a stop
                    break
            t_beats = time.process_time()
            turn = 0  # beats this turn: at most BEATS_PER_TURN, then commands get their turn (as a relay's POLL_LIMIT)
            while self.next_slot <= (now - self.epoch) / TICK_S and turn < BEATS_PER_TURN:
                due = self.epoch + self.next_slot * TICK_S
                slot = self.wheel[self.next_slot % SLOTS]
                self.next_slot += 1
                turn += len(slot)
                for sim in slot:
                    if sim.state == "stopped":
                        continue
                    sim.ticks += 1  # one 1 s clock; before start only every STARTUP_HEARTBEAT_S-th tick beats
                    if sim.state != "running" and sim.ticks % startup_ticks != 1:
                        continue
                    sim.seq += 1
                    if sim.seq % 8 == 0:  # a sample of how late beats leave
                        self.late.append(now - due)
                    beat = sim.beat
                    beat["state"], beat["seq"], beat["sent"] = sim.state, sim.seq, now
                    beat["gap_s"] = now - sim.last_beat if sim.last_beat else 0.0
                    if sim.role == TRAINER:
                        beat["progress"] = sim.seq
                    sim.node.forward(sim.msg)
                    sim.last_beat = now
            self.beat_cpu += time.process_time() - t_beats
            if now >= next_name and self.sims[0].state == "running" and len(self.asked) < 100:
                next_name = now + 1.0 / NAMES_RATE
                sim, other = random.choice(self.sims), random.choice(self.sims)
                self.name_call(sim, self.names_steady, "get", key=f"{other.key}/prometheus")
            for node in self.nodes:
                node.flush()
            # beats fall due every few µs here: wake for them at most every TICK_S, for commands at once
            wait = min(FLUSH_S, max(0.0, self.epoch + self.next_slot * TICK_S - time.monotonic()))
            if turn >= BEATS_PER_TURN:  # behind: look for commands without sleeping
                wait = 0.0
            if self.poller.poll(round(wait * 1000)):
                for node in self.nodes:
                    node.read_commands()
                for node in self.nodes:  # replies (statuses) leave at once, as a real relay's step does
                    node.flush()
        for node in self.nodes:
            node.flush(force=True)
        time.sleep(1.0)  # the last stopped statuses leave before the sockets close
        counters: dict[str, int] = {}
        for node in self.nodes:
            for k, v in node.counters().items():
                counters[k] = counters.get(k, 0) + v
            node.close()
        self.ctx.close()
        self.late.sort()
        late_p99 = self.late[min(len(self.late) - 1, int(0.99 * len(self.late)))] * 1e3 if self.late else float("nan")
        out = {"cpu_s": time.process_time() - self.started, "lookup_ms": self.lookup_ms,
               "names_startup_ms": [x * 1e3 for x in self.names_startup],
               "names_steady_ms": [x * 1e3 for x in self.names_steady], "late_p99_ms": late_p99,
               "relays": counters, "beat_cpu_s": self.beat_cpu,
               **self.counts}
        (self.run_dir / f"fakes-n{self.first}.json").write_text(json.dumps(out))


def start(run_dir: Path, nodes: int, per_node: int, procs: int) -> tuple[subprocess.Popen[bytes], int]:
    """The simulated nodes in ``procs`` processes of one new session: (its leader, the number of processes)."""
    share = -(-nodes // max(1, min(procs, nodes)))
    procs = len(range(0, nodes, share))  # as ``session`` splits them
    leader = subprocess.Popen([sys.executable, __file__, "_session", str(run_dir), str(nodes), str(per_node), str(procs)],
                              start_new_session=True)
    return leader, procs


def session(run_dir: Path, nodes: int, per_node: int, procs: int) -> None:
    share = -(-nodes // procs)
    children = [subprocess.Popen([sys.executable, __file__, str(run_dir), str(first), str(min(share, nodes - first)),
                                  str(per_node)]) for first in range(0, nodes, share)]
    for child in children:
        child.wait()


if __name__ == "__main__":
    if sys.argv[1] == "_session":
        session(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif os.environ.get("BENCH_PROFILE_FAKES"):  # a cProfile of each node process, CPU time
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        profiler.runcall(lambda: NodesProcess(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                              int(sys.argv[4])).run())
        profiler.dump_stats(f"{os.environ['BENCH_PROFILE_FAKES']}.n{sys.argv[2]}")
    else:
        NodesProcess(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])).run()
