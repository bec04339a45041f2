"""Each stream end to end over tcp://127.0.0.1 and ipc://, plus params newest-wins and sample backpressure."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import zmq

from srljax.comm import (
    ControlClient,
    ControlServer,
    InferenceClient,
    InferenceServer,
    ParamsPublisher,
    ParamsSubscriber,
    SampleReceiver,
    SampleSender,
    bind,
    bind_random,
    make_socket,
)

TRIAL = "exp/t0"
ADDRESSES = ["tcp://127.0.0.1:*", "ipc://*"]


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)  # never hangs, even if a test failed before closing its sockets


@pytest.mark.parametrize("address", ADDRESSES)
def test_inference_many_clients_many_in_flight(ctx: zmq.Context, address: str) -> None:
    server = InferenceServer(address, TRIAL, ctx=ctx)
    assert server.address.split(":")[0] in ("tcp", "ipc") and "*" not in server.address
    clients = [InferenceClient(server.address, TRIAL, ctx=ctx) for _ in range(2)]
    for c, client in enumerate(clients):
        for rid in range(3):  # an env ring: several batches in flight per client
            assert client.send(rid, {"obs": np.full((4, 3), 10 * c + rid, np.uint8)}, timeout_ms=2000)
    requests: list[Any] = []
    deadline = time.monotonic() + 5
    while len(requests) < 6 and time.monotonic() < deadline:
        requests += server.poll_requests(timeout_ms=100)
    assert len(requests) == 6
    for req in reversed(requests):  # answer out of order; ids sort it out
        assert server.reply(req, {"action": req.tree["obs"][:, 0].astype(np.int32)}, version=7)
    for c, client in enumerate(clients):
        got = {}
        for _ in range(3):
            rep = client.recv(timeout_ms=2000)
            assert rep is not None and rep.version == 7
            got[rep.request_id] = rep.tree["action"]
        assert {rid: a.tolist() for rid, a in got.items()} == {rid: [10 * c + rid] * 4 for rid in range(3)}
    assert server.reply(requests[0]._replace(client_id=b"\x00nobody"), {}) is False
    assert server.counters() == {"received": 6, "sent": 6, "reply_dropped": 1}
    for endpoint in [*clients, server]:
        endpoint.close()


@pytest.mark.parametrize("address", ADDRESSES)
def test_samples_roundtrip(ctx: zmq.Context, address: str) -> None:
    with SampleReceiver(address, TRIAL, ctx=ctx) as rx, SampleSender(rx.address, TRIAL, ctx=ctx) as tx:
        traj = {"obs": np.random.default_rng(0).integers(0, 255, (9, 8, 84, 84), dtype=np.uint8),
                "reward": np.ones((9, 8), np.float32), "extras": {"logp": np.zeros((9, 8), np.float32)}}
        assert tx.send(traj, timeout_ms=2000, version=3, meta={"actor": "exp/t0/actor/1"})
        msg = rx.recv(timeout_ms=2000)
        assert msg is not None and msg.kind == "sample" and msg.version == 3 and msg.meta == {"actor": "exp/t0/actor/1"}
        np.testing.assert_array_equal(msg.tree["obs"], traj["obs"])
        assert rx.recv(timeout_ms=0) is None


def _sync_params(pub: ParamsPublisher, sub: ParamsSubscriber) -> None:
    """PUB/SUB slow joiner: publish a marker until the subscription is live."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pub.publish(0, None)
        if sub.poll_newest(timeout_ms=20) is not None:
            while sub.poll_newest(timeout_ms=20) is not None:  # flush the extra markers
                pass
            return
    raise AssertionError("subscription never came up")


@pytest.mark.parametrize("address", ADDRESSES)
def test_params_subscriber_keeps_only_newest(ctx: zmq.Context, address: str) -> None:
    with ParamsPublisher(address, TRIAL, ctx=ctx, hwm=10) as pub, ParamsSubscriber(pub.address, TRIAL, ctx=ctx) as sub:
        _sync_params(pub, sub)
        for v in range(1, 6):
            pub.publish(v, {"w": np.full((64, 64), v, np.float32)})
        time.sleep(0.2)  # let them all arrive
        got = sub.poll_newest(timeout_ms=1000)
        assert got is not None and got.version == 5
        assert float(got.tree["w"][0, 0]) == 5.0
        assert sub.poll_newest(timeout_ms=50) is None
        assert sub.counts["superseded"] >= 4  # the markers and versions 1..4 were skipped


@pytest.mark.parametrize("address", ADDRESSES)
def test_sample_backpressure_bounds_memory(ctx: zmq.Context, address: str) -> None:
    blob = {"obs": np.zeros(1 << 20, np.uint8)}  # 1 MiB
    with SampleReceiver(address, TRIAL, ctx=ctx, hwm=2) as rx, SampleSender(rx.address, TRIAL, ctx=ctx, hwm=2) as tx:
        sent = 0
        while tx.send(blob, timeout_ms=300):
            sent += 1
            assert sent < 64, "a receiver that does not read must stop the sender"
        # stalled for good: more tries all time out, nothing more is queued
        assert not any(tx.send(blob, timeout_ms=10) for _ in range(5))
        assert tx.counts["send_timeouts"] == 6 and tx.counts["sent"] == sent
        got = 0
        while rx.recv(timeout_ms=500) is not None:
            got += 1
        assert got == sent  # nothing was lost on the way
        assert tx.send(blob, timeout_ms=2000) and rx.recv(timeout_ms=2000) is not None  # and it flows again


@pytest.mark.parametrize("address", ADDRESSES)
def test_control_register_and_command(ctx: zmq.Context, address: str) -> None:
    with ControlServer(address, TRIAL, ctx=ctx) as server:
        workers = [ControlClient(server.address, TRIAL, f"exp/t0/actor/{i}", ctx=ctx) for i in range(3)]
        assert server.send("exp/t0/actor/0", "start") is False  # never heard from it
        for w in workers:
            assert w.send("register", {"pid": 1, "addr": "tcp://h:1", "sizes": [1, 2]})
        msgs = []
        deadline = time.monotonic() + 5
        while len(msgs) < 3 and time.monotonic() < deadline:
            msgs += server.poll(timeout_ms=100)
        assert sorted(m.worker for m in msgs) == [f"exp/t0/actor/{i}" for i in range(3)]
        assert all(m.kind == "register" and m.payload["sizes"] == [1, 2] for m in msgs)
        assert set(server.last_seen) == {m.worker for m in msgs}
        assert server.send("exp/t0/actor/2", "configure", {"seed": 2, "lr": 1e-3})
        cmd = workers[2].recv(timeout_ms=2000)
        assert cmd is not None and tuple(cmd) == ("configure", "exp/t0/actor/2", {"seed": 2, "lr": 1e-3})
        assert workers[0].recv(timeout_ms=50) is None
        with pytest.raises(TypeError):
            workers[0].send("status", {"arr": np.zeros(2)})  # msgpack-only payloads
        for w in workers:
            w.close()


def test_control_client_can_start_before_controller(ctx: zmq.Context) -> None:
    # ipc, not a free tcp port: the client's reconnect attempts could take that port themselves
    address = f"ipc://{tempfile.gettempdir()}/srljax-test-{uuid.uuid4().hex[:8]}.sock"
    worker = ControlClient(address, TRIAL, "exp/t0/trainer/0", ctx=ctx)
    # nothing is queued before the connection is up (ZMQ_IMMEDIATE): no stale backlog when it comes
    assert not worker.send("heartbeat", {"seq": 0}, timeout_ms=200)
    try:
        with ControlServer(address, TRIAL, ctx=ctx) as server:
            assert worker.send("register", {}, timeout_ms=5000)  # goes once the controller has bound
            msgs = server.poll(timeout_ms=5000)
            assert [m.kind for m in msgs] == ["register"]
    finally:
        worker.close()
        os.unlink(address.removeprefix("ipc://"))  # libzmq leaves explicit ipc paths behind


def test_unrelated_trials_do_not_mix(ctx: zmq.Context) -> None:
    with SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx) as rx:
        with SampleSender(rx.address, "exp/other", ctx=ctx) as stranger, SampleSender(rx.address, TRIAL, ctx=ctx) as tx:
            assert stranger.send({"x": np.ones(3)}, timeout_ms=2000)
            assert tx.send({"x": np.zeros(3)}, timeout_ms=2000)
            deadline = time.monotonic() + 5
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = rx.recv(timeout_ms=100)
            assert msg is not None and msg.tree["x"].tolist() == [0, 0, 0]
            while rx.drops.total() < 1 and time.monotonic() < deadline:
                rx.recv(timeout_ms=10)
            assert rx.counters() == {"received": 1, "drop.foreign_trial": 1}


def test_socket_helpers(ctx: zmq.Context) -> None:
    sock = make_socket(ctx, zmq.PULL, rcvhwm=3)
    try:
        address = bind_random(sock)
        assert address.startswith("tcp://127.0.0.1:") and int(address.rsplit(":", 1)[1]) > 0
        assert sock.getsockopt(zmq.LINGER) >= 0 and sock.getsockopt(zmq.IPV6) == 0
        assert sock.getsockopt(zmq.RCVHWM) == 3
        with pytest.raises(ValueError):
            bind(sock, "ipc:///tmp/" + "x" * 120)
    finally:
        sock.close()
    rx = SampleReceiver("ipc://*", TRIAL, ctx=ctx)
    path = rx.address.removeprefix("ipc://")
    assert os.path.exists(path)
    rx.close()
    deadline = time.monotonic() + 5
    while os.path.exists(path) and time.monotonic() < deadline:  # its I/O thread unlinks it, soon
        time.sleep(0.01)
    assert not os.path.exists(path)
