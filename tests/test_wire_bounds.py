"""Whole-message bounds on every receiving socket and the Prometheus endpoint's connection bounds, on real sockets.

A frame bound (``ZMQ_MAXMSGSIZE``) alone let one message of many small frames grow a trainer for good; here such
a message is dropped and counted before decoding, the receiver keeps working and the memory is given back; the
``layout.max_message_bytes`` cap applies to data streams and a cap below the trial's own messages is refused.
A Prometheus endpoint serves a bounded number of connections, closes idle and dripping ones, and scrapes again.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time

import numpy as np
import pytest
import zmq

from srljax.comm import ControlClient, ControlServer, SampleReceiver, SampleSender
from srljax.comm.security import KeyRing, WireContext, WireRules
from srljax.config import Experiment, apply_overrides, problems
from srljax.system.shell import auth
from srljax.system.shell.bounds import FLOOR, check_message_cap, largest_messages, stream_message_limits
from srljax.telemetry.prometheus import Exporter, scrape, serve_metrics
from srljax.types import EnvSpec

TRIAL = "exp/t0"
FRAME = 60 << 10  # under the 64 KiB frame bound below


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / (1 << 20)


def _flood(address: str, frames: int, *, route: bool = False) -> None:
    """One message of ``frames`` 60 KiB frames from a plain (no key) peer, in its own context."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER if route else zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 120_000)  # a loaded box may take many seconds to move 150 MB: never drop it
    sock.connect(address)
    sock.send_multipart([b"x" * FRAME] * frames)
    sock.close()
    ctx.term()  # returns once the message has left


@pytest.mark.parametrize("auth_on", [False, True])
def test_a_message_of_many_small_frames_is_dropped_counted_and_its_memory_given_back(auth_on: bool) -> None:
    keys = KeyRing.generate(["trainer", "actor"]) if auth_on else None
    ctx = WireContext(WireRules(keys=keys, identity="trainer"))
    rx = SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx, max_bytes=64 << 10, max_message_bytes=1 << 20)
    assert rx.max_message == 1 << 20 and rx.sock.getsockopt(zmq.MAXMSGSIZE) == 64 << 10
    before = _rss_mib()
    if auth_on:  # a peer holding a trial key (the attack the issue saw): CURVE does not stop it, the bound does
        tx_ctx = WireContext(WireRules(keys=keys, identity="actor", peer_roles={rx.address: "trainer"}))
        tx = SampleSender(rx.address, TRIAL, ctx=tx_ctx)
        tx.sock.send_multipart([b"x" * FRAME] * 2500)
    else:
        _flood(rx.address, 2500)  # 150 MB, every frame under the frame bound
    assert rx.recv(timeout_ms=20_000) is None
    assert rx.counters().get("drop.too_big") == 1, rx.counters()
    grown = _rss_mib() - before
    assert grown < 60, f"the process kept {grown:.0f} MiB of a dropped 150 MB message"
    # the receiver still takes a good message, of several frames under the bound
    good = SampleSender(rx.address, TRIAL, ctx=tx_ctx if auth_on else None)
    assert good.send({"a": np.ones(1000, np.float32), "b": np.zeros((3, 4))}, timeout_ms=5000)
    msg = rx.recv(timeout_ms=5000)
    assert msg is not None and msg.tree["a"].shape == (1000,)
    good.close()
    if auth_on:
        tx.close()
        tx_ctx.close()
    rx.close()
    ctx.close()


def test_the_control_server_drops_a_many_frame_message_and_keeps_serving() -> None:
    ctx = WireContext(WireRules(limits={"control": 256 << 10}))
    server = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
    assert server.max_message == 4 * (256 << 10)  # one body frame; four frame bounds at most
    _flood(server.address, 40, route=True)  # 2.4 MB in 40 frames of 60 KiB, each under the frame bound
    client = ControlClient(server.address, TRIAL, "exp/t0/actor/0", ctx=ctx)
    deadline, kinds = time.monotonic() + 20, []
    while not (kinds and server.counters().get("drop.too_big")) and time.monotonic() < deadline:
        client.send("heartbeat", {"n": 1}, timeout_ms=100)
        kinds += [m.kind for m in server.poll(timeout_ms=200)]
    assert "heartbeat" in kinds
    assert server.counters().get("drop.too_big") == 1, server.counters()
    client.close()
    server.close()
    ctx.close()


def test_the_layout_cap_bounds_data_streams_not_the_control_channel() -> None:
    ctx = WireContext(WireRules(limits={"samples": 64 << 20, "control": 256 << 10},
                                message_limits={"samples": 512 << 20}, max_message_bytes=2 << 20))
    rx = SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
    assert rx.max_message == 2 << 20 and rx.sock.getsockopt(zmq.MAXMSGSIZE) == 2 << 20
    control = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
    assert control.max_message == 4 * (256 << 10)
    rx.close()
    control.close()
    ctx.close()


def test_worker_contexts_carry_the_cap_and_a_cap_below_the_trials_messages_is_refused() -> None:
    cfg = apply_overrides(Experiment(), ["layout.mode=distributed", "layout.max_message_bytes=2097152"])
    ctx = auth.worker_context(cfg, None, "trainer")
    assert ctx.rules.max_message_bytes == 2 << 20
    ctx.close()
    spec = EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)
    extras = {"logp": ((), "float32"), "value": ((), "float32")}
    cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, num_steps=128),
                              env=dataclasses.replace(cfg.env, num_envs=8))
    largest = largest_messages(cfg, spec, extras)
    assert largest["samples"] > 129 * 8 * 84 * 84 * 4  # every leaf of a segment, not only the observation
    assert stream_message_limits(cfg, spec, extras)["samples"] == FLOOR + 2 * largest["samples"]
    with pytest.raises(ValueError, match=r"layout.max_message_bytes=2,097,152 is below .*samples .*raise it"):
        check_message_cap(cfg, largest)
    check_message_cap(dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, max_message_bytes=0)), largest)
    tiny = apply_overrides(Experiment(), ["layout.mode=distributed", "layout.max_message_bytes=1000"])
    assert any("layout.max_message_bytes=1000 must be 0" in p for p in problems(tiny))


# -- Prometheus ------------------------------------------------------------------------------------------------
def test_a_connection_flood_holds_a_bounded_number_of_threads_and_scrapes_resume() -> None:
    exporter = Exporter(0, "127.0.0.1", process=False)
    exporter.set("episode_return", 21.0)
    host, port = exporter.address.split(":")
    threads = threading.active_count()
    flood = [socket.create_connection((host, int(port))) for _ in range(60)]  # idle: they send nothing
    deadline = time.monotonic() + 20  # accepted one at a time, each refused at once: fast, but a busy box is slow
    while exporter.refused < 60 - 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert exporter.refused == 60 - 8  # the first 8 hold a slot each, the rest were closed unread
    assert threading.active_count() - threads <= 8
    deadline = time.monotonic() + 15  # the idle 8 time out after 5 s of silence
    while time.monotonic() < deadline:
        try:
            families = scrape(exporter.address, timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    assert families["srljax_train_episode_return"].samples[0].value == 21.0
    for s in flood:
        s.close()
    exporter.close()


def test_a_dripping_connection_is_shut_after_its_deadline() -> None:
    from prometheus_client import CollectorRegistry

    server, _ = serve_metrics(CollectorRegistry(), 0, "127.0.0.1", max_connections=2, connection_s=1.5)
    drip = socket.create_connection(("127.0.0.1", server.server_address[1]))
    start, closed = time.monotonic(), False
    for byte in b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 40:  # a byte every 0.2 s: never 5 s silent
        try:
            drip.sendall(bytes([byte]))
            time.sleep(0.2)
            drip.settimeout(0.001)
            if drip.recv(1) == b"":
                closed = True
                break
        except (TimeoutError, BlockingIOError):
            continue
        except OSError:
            closed = True
            break
    took = time.monotonic() - start
    assert closed and 1.4 < took < 4, took
    assert server.shut == 1
    drip.close()
    server.shutdown()
    server.server_close()
