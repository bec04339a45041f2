"""A node's relay (``srljax/system/shell/relay.py``) over real sockets, CURVE on: workers' messages reach the
controller in batches over one connection, commands come back (one per worker or one fan-out per node),
the sender check holds on both legs, bad batch entries are dropped alone; and a real ``Controller`` with
real ``Worker`` threads that reach it only through ``$SRLJAX_CONTROL_ADDRESS`` registers, configures,
starts and stops them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from srljax.comm import ControlClient, ControlMessage, ControlServer, MemoryNames
from srljax.comm.codec import decode, encode
from srljax.comm.control import CONTROL_ADDRESS_ENV, RELAY, TO_CONTROLLER, pack_entry, relay_frame
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import CONTROLLER
from srljax.system.shell import auth
from srljax.system.shell.auth import worker_context
from srljax.system.shell.common import trial_name
from srljax.system.shell.controller import Controller
from srljax.system.shell.relay import FLUSH_S, Relay
from srljax.system.shell.worker import Worker
from tests.test_control_plane import SPEC
from tests.test_system_threads import small_config


def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Running:
    """A relay stepping in its own thread (its sockets are used there only), stopped and closed on exit."""

    def __init__(self, relay: Relay) -> None:
        self.relay, self.stop = relay, threading.Event()
        self.thread = threading.Thread(target=relay.run, args=(self.stop.is_set, 20), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.relay.close()


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[tuple[Experiment, KeyRing, ControlServer, Running]]:
    cfg = small_config(tmp_path, "layout.auth=on")
    keys = KeyRing.generate(auth.identities(cfg))
    ctx = worker_context(cfg, keys, CONTROLLER)
    server = ControlServer("tcp://127.0.0.1:*", trial_name(cfg), ctx=ctx)
    running = Running(Relay(cfg, "n0", server.address, keys=keys, bind="tcp://127.0.0.1:*"))
    yield cfg, keys, server, running
    running.close()
    server.close()
    ctx.close()


def _gather(server: ControlServer, n: int, timeout: float = 10.0) -> list[ControlMessage]:
    got: list[ControlMessage] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += server.poll(timeout_ms=100)
    return got


def test_a_relay_frame_is_what_the_codec_would_encode() -> None:
    messages = [["exp/t0/actor/0", "heartbeat", {"state": "running", "seq": 3, "sent": 1.5}],
                ["exp/t0/actor/1", "register", {"pid": 7, "addresses": {"samples": "tcp://h:1"}}]]
    alive = ["exp/t0/actor/2", "a1b2c3"]
    frame = relay_frame("exp/t0", "exp/t0/relay/n0", [pack_entry(*m) for m in messages], alive)
    meta = {"worker": "exp/t0/relay/n0", "payload": {"alive": alive, "messages": messages}}
    got, want = decode([frame], "exp/t0", TO_CONTROLLER), decode(encode(RELAY, "exp/t0", None, meta=meta), "exp/t0")
    assert (got.kind, got.meta, got.version) == (want.kind, want.meta, want.version) == (RELAY, meta, -1)


def test_relay_carries_a_nodes_workers_both_ways(wire) -> None:
    cfg, keys, server, running = wire
    trial, relay = trial_name(cfg), running.relay
    names = [f"{trial}/actor/0", f"{trial}/actor/1"]
    ctxs = [worker_context(cfg, keys, "actor") for _ in names]
    clients = [ControlClient(relay.address, trial, name, ctx=ctx) for name, ctx in zip(names, ctxs)]
    try:
        for client in clients:
            _until(lambda c=client: c.send("register", {"pid": 1}, timeout_ms=100))
        got = _gather(server, 2)
        assert sorted((m.kind, m.worker) for m in got) == [("register", n) for n in names]
        assert server.routes[names[0]] == server.routes[names[1]]  # one connection for the node
        assert list(server.relays.values()) == [relay.key]

        received = server.counts["received"]
        for seq in range(20):  # heartbeats wait up to FLUSH_S for company: far fewer messages than beats
            clients[seq % 2].send("heartbeat", {"state": "created", "seq": seq})
        beats = _gather(server, 20)
        assert [m.payload["seq"] for m in beats if m.worker == names[0]] == list(range(0, 20, 2))
        assert server.counts["received"] - received < 20

        # nothing new since its last whole heartbeat: the name alone (a sign of life)
        for seq, waiting in ((100, ""), (101, ""), (102, "samples")):
            clients[0].send("heartbeat", {"state": "running", "seq": seq, "waiting": waiting, "loop_age_s": 0.1,
                                          "incarnation": "i0"})
        time.sleep(3 * FLUSH_S)
        whole = [m.payload["seq"] for m in server.poll(timeout_ms=2000) if m.kind == "heartbeat"]
        assert whole == [100, 102], whole  # 101 said nothing new; 102's ``waiting`` changed
        assert server.take_alive({names[0]: "other"}.get) == 0  # not the current incarnation: not a sign of life
        clients[0].send("heartbeat", {"state": "running", "seq": 103, "waiting": "samples", "loop_age_s": 0.1,
                                      "incarnation": "i0"})
        _until(lambda: not server.poll(timeout_ms=50) and bool(server.alive))  # poll reads the batch
        before = server.last_seen[names[0]]
        assert server.take_alive({names[0]: "i0"}.get) == 1 and server.last_seen[names[0]] > before

        sent = server.counts["sent"]
        assert server.send(names[1], "configure", {"seed": 3})  # one worker's command, queued for its relay
        assert server.send(names[0], "status", {"ping": 1})
        server.flush()  # (``poll`` does it too)
        assert server.counts["sent"] - sent == 1  # both in one message to the relay
        msg = clients[1].recv(timeout_ms=5000)
        assert msg is not None and (msg.kind, msg.worker, msg.payload) == ("configure", names[1], {"seed": 3})
        msg = clients[0].recv(timeout_ms=5000)
        assert msg is not None and (msg.kind, msg.worker, msg.payload) == ("status", names[0], {"ping": 1})
        with pytest.raises(TypeError):
            server.send(names[0], "configure", {1: "no int keys on the wire"})
        sent = server.counts["sent"]
        assert server.send_many(names, "start") == []  # both behind one relay: one message
        assert server.counts["sent"] - sent == 1
        for client, name in zip(clients, names):
            msg = client.recv(timeout_ms=5000)
            assert msg is not None and (msg.kind, msg.worker) == ("start", name)
        assert server.send_many([f"{trial}/actor/9"], "stop") == [f"{trial}/actor/9"]  # never heard from
    finally:
        for client, ctx in zip(clients, ctxs):
            client.close()
            ctx.close()


def test_the_sender_check_holds_through_the_relay_and_at_the_controller(wire) -> None:
    cfg, keys, server, running = wire
    trial, relay = trial_name(cfg), running.relay
    actor_ctx, relay_ctx = worker_context(cfg, keys, "actor"), worker_context(cfg, keys, RELAY)
    liar = ControlClient(relay.address, trial, f"{trial}/trainer/0", ctx=actor_ctx)  # actor key, trainer name
    fake_relay = ControlClient(server.address, trial, f"{trial}/{RELAY}/x", ctx=actor_ctx)  # actor key as a relay
    own = ControlClient(server.address, trial, f"{trial}/{RELAY}/y", ctx=relay_ctx)  # a relay key, bad entry
    try:
        _until(lambda: liar.send("done", {"update": 1}, timeout_ms=100))
        _until(lambda: fake_relay.send(RELAY, {"messages": [[f"{trial}/trainer/0", "done", {}]]}, timeout_ms=100))
        _until(lambda: own.send(RELAY, {"messages": [b"not a list", [f"{trial}/actor/3", "relay", {}],
                                                     [f"{trial}/actor/3", "register", {"pid": 7}]]}, timeout_ms=100))
        got = _gather(server, 1)
        time.sleep(3 * FLUSH_S)
        got += server.poll(timeout_ms=200)
        assert [(m.kind, m.worker, m.payload) for m in got] == [("register", f"{trial}/actor/3", {"pid": 7})]
        assert server.drops["malformed"] == 2 and server.drops["sender"] == 1, dict(server.drops)
        _until(lambda: relay.down is not None and relay.down.drops["sender"] == 1)  # the liar stopped at the relay
    finally:
        for endpoint in (liar, fake_relay, own):
            endpoint.close()
        actor_ctx.close()
        relay_ctx.close()


def test_a_real_controller_runs_real_workers_through_a_relay(tmp_path: Path, monkeypatch) -> None:
    cfg = small_config(tmp_path, "layout.auth=on", "log.prometheus_port=-1")
    keys = KeyRing.generate(auth.identities(cfg))
    controller = Controller(cfg, MemoryNames(), spec=SPEC, verbose=False, keys=keys, connections=1)
    running = Running(Relay(cfg, "n0", controller.server.address, keys=keys, bind="tcp://127.0.0.1:*"))
    monkeypatch.setenv(CONTROL_ADDRESS_ENV, running.relay.address)  # the only way they find it
    workers = [type(f"Quiet{role}", (Worker,), {"role": role})(cfg, int(index), MemoryNames(), keys=keys)
               for role, index in (name.split("/") for name in controller.expected.values())]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        keys_ = list(controller.expected)
        controller._wait_until(keys_, lambda k: k in controller.info, 20, "register")
        assert set(controller.server.relays.values()) == {running.relay.key}
        assert {controller.server.routes[k] for k in keys_} == set(controller.server.relays)
        controller._send(keys_, "configure", controller.configure_payload())
        controller._wait_until(keys_, lambda k: controller.states.get(k) == "ready", 20, "configure")
        controller._started = True
        controller._send(keys_, "start")
        controller._wait_until(keys_, lambda k: controller.states.get(k) == "running", 20, "start")
        # the next beats of the non-trainers say nothing new: their names alone
        _until(lambda: controller._tick(50) or controller.server.counts["alive"] >= 3)
        seen = dict(controller.server.last_seen)
        time.sleep(1.5)
        controller._tick(100)
        assert all(controller.server.last_seen[k] > seen[k] for k in keys_)  # every worker still seen
        assert controller.stop_all(grace_s=20) == []
        for thread in threads:
            thread.join(timeout=10)
            assert not thread.is_alive()
        assert running.relay.counts["undelivered"] == 0
    finally:
        for worker in workers:
            worker.request_stop("test over")
        running.close()
        controller.close()


def test_the_relay_process_serves_a_trial_and_ends_with_it(tmp_path: Path) -> None:
    """``python -m srljax.system.shell.relay RUN_DIR``: finds the controller in the run folder, reads the
    trial's keys, publishes its address, carries a worker's register, and exits once status.json is written."""
    import json
    import subprocess
    import sys

    from srljax.comm import DirectoryNames, worker_key
    from srljax.config import write_json

    cfg = auth.resolved(small_config(tmp_path, "layout.auth=on"), slurm=False)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True)
    write_json(cfg, run_dir / "config.json")
    keys = auth.prepare(cfg, run_dir)
    ctx = worker_context(cfg, keys, CONTROLLER)
    server = ControlServer("tcp://127.0.0.1:*", trial_name(cfg), ctx=ctx)
    names = DirectoryNames(run_dir / "names")
    names.add(worker_key(cfg.name, cfg.trial, CONTROLLER, 0), server.address)
    proc = subprocess.Popen([sys.executable, "-m", "srljax.system.shell.relay", str(run_dir), "--node", "n7",
                             "--bind", "tcp://127.0.0.1:*"], cwd=Path(__file__).resolve().parents[1])
    actor_ctx = worker_context(cfg, keys, "actor")
    client = None
    try:
        address = names.wait(f"{worker_key(cfg.name, cfg.trial, RELAY, 'n7')}/control", timeout=60)
        client = ControlClient(address, trial_name(cfg), f"{trial_name(cfg)}/actor/0", ctx=actor_ctx)
        _until(lambda: client.send("register", {"pid": 1}, timeout_ms=100), timeout=30)
        got = _gather(server, 1)
        assert [(m.kind, m.worker) for m in got] == [("register", f"{trial_name(cfg)}/actor/0")]
        assert list(server.relays.values()) == [worker_key(cfg.name, cfg.trial, RELAY, "n7")]
        (run_dir / "status.json").write_text(json.dumps({"exit_code": 0}))  # the controller's last act
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if client is not None:
            client.close()
        actor_ctx.close()
        server.close()
        ctx.close()
