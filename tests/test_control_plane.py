"""The control plane under many workers: bounded polls, waits that name who is missing, bounded logs.

The figures at 100, 1,000 and 10,000 workers come from ``python bench/control_plane.py``; these
tests pin the behaviour that the scale fixes must keep.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from srljax.comm import ControlClient, ControlServer, MemoryNames
from srljax.system.shell.common import trial_name
from srljax.system.shell.controller import NAMES_SHOWN, Controller, TrialEnded
from srljax.system.shell.fd_limits import raise_open_files
from srljax.types import EnvSpec
from tests.test_system_threads import small_config

TRIAL = "exp/t0"
SPEC = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=4, batch_size=4)


def test_control_poll_takes_at_most_limit() -> None:
    with ControlServer("tcp://127.0.0.1:*", TRIAL) as server:
        client = ControlClient(server.address, TRIAL, "exp/t0/actor/0")
        for seq in range(25):
            assert client.send("heartbeat", {"state": "running", "seq": seq})
        time.sleep(0.5)  # all 25 queued at the server, so an unbounded poll would take them at once
        batches, deadline = [], time.monotonic() + 10
        while sum(batches) < 25 and time.monotonic() < deadline:
            got = server.poll(timeout_ms=200, limit=10)
            batches.append(len(got))
            assert [m.payload["seq"] for m in got] == sorted(m.payload["seq"] for m in got)  # in order
        assert sum(batches) == 25 and max(batches) == 10, batches
        client.close()


@pytest.fixture
def controller(tmp_path: Path):
    cfg = small_config(tmp_path, "layout.num_actors=118", "layout.num_policy_workers=1")
    ctl = Controller(cfg, MemoryNames(), spec=SPEC, verbose=False)
    yield ctl
    ctl.close()


def test_wait_names_only_the_missing_worker_then_returns(controller: Controller) -> None:
    keys = list(controller.expected)
    assert len(keys) == 120
    clients = [ControlClient(controller.server.address, trial_name(controller.cfg), key) for key in keys]
    try:
        for client in clients[:-1]:
            client.send("register", {"pid": 1, "incarnation": "a"})
        with pytest.raises(TrialEnded) as ended:
            controller._wait_until(keys, lambda k: k in controller.info, 1.5, "register")
        missing = ended.value.result.message.split("waiting for: ")[1]
        assert missing == controller.expected[keys[-1]]  # the one that never registered, and only it
        clients[-1].send("register", {"pid": 1, "incarnation": "a"})
        began = time.monotonic()
        controller._wait_until(keys, lambda k: k in controller.info, 10.0, "register")
        assert time.monotonic() - began < 10.0
    finally:
        for client in clients:
            client.close()


def test_registered_line_names_at_most_a_few(controller: Controller, monkeypatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(controller, "say", said.append)
    controller.info = {key: {"pid": 7} for key in controller.expected}

    def first_send(keys: list[str], kind: str, payload: object = None) -> None:
        raise RuntimeError(kind)

    monkeypatch.setattr(controller, "_send", first_send)
    with pytest.raises(RuntimeError, match="configure"):  # stop right after the line, at the first configure
        controller._run()
    (line,) = [text for text in said if "workers registered" in text]
    assert line.startswith("all 120 workers registered: trainer/0 (pid 7), ")
    assert line.count("(pid 7)") == NAMES_SHOWN and line.endswith(f" and {120 - NAMES_SHOWN} more")



def test_open_files_raised_for_the_workers_or_refused_with_the_fix() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2_000:
        pytest.skip(f"hard open-file limit {hard} is too low to test raising")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1_024, hard))  # a common default soft limit
        assert raise_open_files(1_500, "the controller") == 1_500
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (1_500, hard)
        assert raise_open_files(1_000, "the controller") == 1_500  # never lowered
        if hard != resource.RLIM_INFINITY:
            with pytest.raises(OSError, match=r"the controller needs [\d,]+ open files .*`ulimit -Hn`"):
                raise_open_files(hard + 1, "the controller")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_worker_heard_only_after_start_up_beats_is_allowed_the_start_up_silence(controller: Controller) -> None:
    """Until its heartbeats say it has seen ``start`` a worker beats every STARTUP_HEARTBEAT_S, so the
    5 s timeout of a running worker would lose one whose ``start`` came late; a running one is lost."""
    key = next(iter(controller.expected))
    controller._started = True
    controller.info[key] = {"pid": 7}
    controller.beats[key] = {"state": "ready"}
    controller.server.last_seen[key] = time.monotonic() - 10.0  # silent 10 s: over the 5 s timeout
    controller._check_liveness()  # allowed STARTUP_SILENCE_S (30 s)
    controller.states[key] = "running"  # its reply to ``start`` said so (the beat is older)
    with pytest.raises(TrialEnded, match=r"no heartbeat for 10\.\d s \(allowed 5 s"):
        controller._check_liveness()
    del controller.states[key]
    controller.beats[key] = {"state": "running"}
    with pytest.raises(TrialEnded, match=r"no heartbeat for 10\.\d s \(allowed 5 s"):
        controller._check_liveness()


def test_a_worker_that_connects_late_registers_once_without_a_heartbeat_backlog(tmp_path: Path) -> None:
    """ZMQ_IMMEDIATE: nothing is queued while the controller is away; ``register`` waits in the worker
    and leaves first once the connection is up; heartbeats meanwhile are dropped, not queued."""
    import os
    import tempfile
    import threading
    import uuid

    from srljax.system.shell.worker import Worker

    cfg = small_config(tmp_path, "log.prometheus_port=-1")
    address = f"ipc://{tempfile.gettempdir()}/srljax-test-{uuid.uuid4().hex[:8]}.sock"
    names = MemoryNames()
    names.add(f"{trial_name(cfg)}/controller/0", address)  # the address is known; nothing listens there yet
    worker = Worker(cfg, 0, names)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(3.0)  # beats fall due meanwhile (every 1 s under the old code, which queued them)
    try:
        with ControlServer(address, trial_name(cfg)) as server:
            got = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                got = server.poll(timeout_ms=200)
            time.sleep(0.1)  # a backlog would arrive in one burst with the register
            got += server.poll(timeout_ms=0)
            assert got and got[0].kind == "register", [m.kind for m in got]
            assert [m.kind for m in got].count("register") == 1
            assert [m.kind for m in got].count("heartbeat") <= 2, [m.kind for m in got]  # sent after the register
            assert server.send(worker.key, "stop")
            thread.join(timeout=10)
            assert not thread.is_alive()
            assert any(m.kind == "status" and m.payload.get("state") == "stopped" for m in server.poll(timeout_ms=2000))
    finally:
        worker.request_stop("test over")
        thread.join(timeout=5)
        if os.path.exists(address.removeprefix("ipc://")):
            os.unlink(address.removeprefix("ipc://"))
