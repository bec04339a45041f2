"""Fuzz every receiving socket: 1,000 bad messages each are dropped and counted by reason, and a
valid message sent afterwards still arrives intact. With CURVE on too: the fuzzer then holds the
trial's keys (an authenticated peer gone bad), and the checks after the handshake still hold."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq

from srljax.comm import ControlServer, InferenceServer, ParamsSubscriber, SampleReceiver, bind, make_socket
from srljax.comm.codec import SCHEMA_VERSION, encode, pack
from srljax.comm.security import KeyRing, WireContext, WireRules

TRIAL = "exp/t0"
N_BAD = 1000
CHUNK = 50  # bad messages in flight at once; small enough for PUB never to hit its HWM
FIELDS = ["kind", "trial", "schema", "version", "meta", "treedef", "arrays"]
BAD_TREEDEFS: list[Any] = [None, 5, "a", [], ["x"], ["a", 1], ["l", "no"], ["d", ["k"], []], ["d", [1.5], [["a"]]],
                           ["n", "T", ["f"], []], ["s", "float32", "notbytes"], ["v", {"no": "maps"}], ["v", 1],
                           ["l", [["a"]] * 50], ["t", [["v", 1]]]]
for _ in range(100):  # past MAX_DEPTH
    BAD_TREEDEFS[-1] = ["l", [BAD_TREEDEFS[-1]]]


@dataclass
class Stream:
    receiver: Any  # the stream endpoint under test
    peer: zmq.Socket  # a raw socket of the matching type, to send anything at all
    receive: Callable[[], Any]  # one short receive; returns a falsy value when nothing valid came
    good: list[bytes]  # a valid message for this stream
    meta_breakers: list[dict[str, Any]]  # meta dicts that the codec accepts but the stream must not
    peer_ipc: str = ""  # an ipc path the raw peer bound (libzmq leaves the file behind)


def _tree() -> dict[str, Any]:
    return {"obs": np.arange(32, dtype=np.uint8).reshape(4, 8), "reward": np.linspace(0, 1, 4, dtype=np.float32),
            "nested": [np.eye(2, dtype=np.int64), {"flag": np.array(True)}], "note": "n"}


def _make(name: str, ctx: zmq.Context, address: str) -> Stream:
    tree = _tree()
    if name == "inference":
        rx: Any = InferenceServer(address, TRIAL, ctx=ctx)
        peer, receive = zmq.DEALER, lambda: rx.poll_requests(timeout_ms=5)
        good = encode("infer_req", TRIAL, tree, meta={"rid": 11})
        breakers = [{}, {"rid": "11"}, {"rid": 1.5}]
    elif name == "samples":
        rx = SampleReceiver(address, TRIAL, ctx=ctx)
        peer, receive = zmq.PUSH, lambda: rx.recv(timeout_ms=5)
        good, breakers = encode("sample", TRIAL, tree, version=4), []
    elif name == "params":
        rx = ParamsSubscriber(None, TRIAL, ctx=ctx)
        peer, receive = zmq.PUB, lambda: rx.poll_newest(timeout_ms=5)
        good, breakers = encode("params", TRIAL, tree, version=9), []
    else:
        rx = ControlServer(address, TRIAL, ctx=ctx)
        peer, receive = zmq.DEALER, lambda: rx.poll(timeout_ms=5)
        good = encode("heartbeat", TRIAL, None, meta={"worker": "exp/t0/actor/0", "payload": {"step": 1}})
        breakers = [{}, {"worker": 3, "payload": {}}, {"worker": "w"}, {"worker": "w", "payload": [1]}]
    sock, peer_ipc = make_socket(ctx, peer), ""
    rules = getattr(ctx, "rules", None)  # CURVE: the raw peer uses the same identity's keys
    if name == "params":  # the publisher binds, the subscriber connects
        if rules is not None:
            rules.secure_server(sock, "params")
        rx.connect(peer_address := bind(sock, address))
        peer_ipc = peer_address.removeprefix("ipc://") if peer_address.startswith("ipc://") else ""
    else:
        if rules is not None:
            rules.peer_roles[rx.address] = rules.identity
            rules.secure_client(sock, rx.stream, rx.address)
        sock.connect(rx.address)
    return Stream(rx, sock, receive, [bytes(f) for f in good], breakers, peer_ipc)


def _rehead(frames: list[bytes], **changes: Any) -> list[bytes]:
    header = msgpack.unpackb(frames[0])
    header.update(changes)
    return [msgpack.packb(header), *frames[1:]]


def _bad_message(rng: np.random.Generator, s: Stream) -> tuple[list[bytes], str]:
    """One bad message and the reason it must be dropped for."""
    good, header = s.good, msgpack.unpackb(s.good[0])
    n_arrays = len(good) - 1
    choices = ["garbage", "truncated", "not_a_map", "missing_field", "wrong_type", "schema", "trial", "kind",
               "treedef", "extra_frame"]
    choices += ["missing_frame", "buffer_size", "dtype", "shape"] if n_arrays else []
    choices += ["meta"] if s.meta_breakers else []
    what = choices[rng.integers(len(choices))]
    i = int(rng.integers(1, n_arrays + 1)) if n_arrays else 0
    if what == "garbage":
        return [rng.bytes(int(rng.integers(0, 300))) for _ in range(rng.integers(1, 5))], "malformed"
    if what == "truncated":
        return [good[0][: rng.integers(0, len(good[0]))], *good[1:]], "malformed"
    if what == "not_a_map":
        return [msgpack.packb([1, "s", [1, 2], None, 3.5, True][rng.integers(6)]), *good[1:]], "malformed"
    if what == "missing_field":
        header.pop(FIELDS[rng.integers(len(FIELDS))])
        return [msgpack.packb(header), *good[1:]], "malformed"
    if what == "wrong_type":
        field = ["kind", "trial", "schema", "version", "meta", "arrays"][rng.integers(6)]
        return _rehead(good, **{field: [None, 1.5, b"b", True][rng.integers(4)]}), "malformed"
    if what == "schema":
        return _rehead(good, schema=int(rng.choice([0, SCHEMA_VERSION + 1, -1, 2**40]))), "schema"
    if what == "trial":
        return _rehead(good, trial=["exp/t1", "other/t0", "", TRIAL + "/x"][rng.integers(4)]), "foreign_trial"
    if what == "kind":
        return _rehead(good, kind=["", "params2", "pickle", "stop!"][rng.integers(4)]), "kind"
    if what == "treedef":
        return _rehead(good, treedef=BAD_TREEDEFS[rng.integers(len(BAD_TREEDEFS))]), "malformed"
    if what == "extra_frame":
        return [*good, rng.bytes(int(rng.integers(0, 10)))], "frames"
    if what == "missing_frame":
        return good[:i] + good[i + 1:], "frames"
    if what == "buffer_size":
        buf = good[i]
        cut = buf[: rng.integers(0, len(buf))] if len(buf) and rng.integers(2) else buf + b"\x00"
        return [*good[:i], cut, *good[i + 1:]], "size"
    if what == "dtype":
        specs = header["arrays"]
        specs[i - 1][0] = ["complex64", "object", "float128", "<f4", "", "bfloat16", "U8"][rng.integers(7)]
        return _rehead(good, arrays=specs), "dtype"
    if what == "shape":
        specs = header["arrays"]
        specs[i - 1][1] = [*specs[i - 1][1], 3]
        return _rehead(good, arrays=specs), "size"
    return _rehead(good, meta=s.meta_breakers[rng.integers(len(s.meta_breakers))]), "malformed"


def _pump(s: Stream, until: Callable[[], bool], timeout_s: float = 10) -> list[Any]:
    valid, deadline = [], time.monotonic() + timeout_s
    while not until() and time.monotonic() < deadline:
        got = s.receive()
        if got:
            valid.append(got)
    assert until(), f"timed out: drops={dict(s.receiver.drops)}"
    return valid


def _wire(s: Stream, frames: list[bytes]) -> list[bytes]:
    """What a peer of ``s`` sends for ``frames``: one packed frame on a one-frame stream (inference)."""
    return [pack(frames)] if s.receiver.single_frame else frames


@pytest.mark.parametrize("address", ["ipc://*"])
def test_one_frame_stream_drops_multipart_and_bad_packing(ctx: zmq.Context, address: str) -> None:
    """The inference stream's body is one packed frame: the codec's multipart frames as they are, a packed
    frame whose table does not add up, and garbage are dropped as ``frames``; a packed message gets through."""
    s = _make("inference", ctx, address)
    packed = pack(s.good)
    bad = [s.good, [packed, packed], [packed[:3]], [packed[:-1]], [packed + b"x" * 16],
           [b"\xff\xff\xff\xff" + packed[4:]], [np.array([0], "<u4").tobytes()]]
    for frames in bad:
        s.peer.send_multipart(frames)
    assert not _pump(s, lambda: s.receiver.drops.total() >= len(bad)), "a bad message got through"
    assert s.receiver.drops == Counter({"frames": len(bad)}), dict(s.receiver.drops)
    s.peer.send_multipart([packed])
    (got,) = _pump(s, lambda: s.receiver.counts["received"] == 1)
    assert got[0].request_id == 11
    np.testing.assert_array_equal(got[0].tree["obs"], _tree()["obs"])
    s.peer.close(0)
    s.receiver.close()
    if s.peer_ipc:
        with contextlib.suppress(OSError):
            os.unlink(s.peer_ipc)


def _sync_subscription(s: Stream) -> None:
    """PUB/SUB slow joiner: publish until the subscription is live, flush, reset the counters."""
    deadline = time.monotonic() + 10
    while not s.receiver.counts["received"]:
        assert time.monotonic() < deadline, "subscription never came up"
        s.peer.send_multipart(s.good)
        s.receive()
    time.sleep(0.05)
    while s.receive():
        pass
    s.receiver.counts.clear()


@pytest.fixture(params=["plain", "curve"])
def ctx(request: pytest.FixtureRequest) -> Iterator[zmq.Context]:
    if request.param == "plain":
        ctx = zmq.Context()
        yield ctx
        ctx.destroy(linger=0)
        return
    # one identity on both ends, pinned for every stream; "actor" matches the control messages' worker key
    rules = WireRules(keys=KeyRing.generate(["actor"]), identity="actor", pinned={"control": "actor", "params": "actor"})
    wire = WireContext(rules)
    yield wire
    wire.close()


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:*", "ipc://*"])
@pytest.mark.parametrize("name", ["inference", "samples", "params", "control"])
def test_fuzz_drops_and_counts_then_recovers(ctx: zmq.Context, name: str, address: str) -> None:
    s = _make(name, ctx, address)
    rng = np.random.default_rng(1234)
    if name == "params":
        _sync_subscription(s)
    expected: Counter[str] = Counter()
    for start in range(0, N_BAD, CHUNK):
        for _ in range(CHUNK):
            frames, reason = _bad_message(rng, s)
            s.peer.send_multipart(_wire(s, frames))
            expected[reason] += 1
        assert not _pump(s, lambda: s.receiver.drops.total() >= start + CHUNK), "a bad message got through"
    assert s.receiver.drops == expected, (dict(s.receiver.drops), dict(expected))
    assert set(expected) >= {"malformed", "frames", "schema", "foreign_trial", "kind"}
    assert name == "control" or set(expected) >= {"dtype", "size"}
    assert s.receiver.counts["received"] == 0

    s.peer.send_multipart(_wire(s, s.good))  # and the stream still works
    (got,) = _pump(s, lambda: s.receiver.counts["received"] == 1)
    if name == "inference":
        assert got[0].request_id == 11
        tree = got[0].tree
    elif name == "samples":
        assert got.version == 4
        tree = got.tree
    elif name == "params":
        assert got.version == 9
        tree = got.tree
    else:
        assert got[0] == ("heartbeat", "exp/t0/actor/0", {"step": 1})
        tree = None
    if tree is not None:
        np.testing.assert_array_equal(tree["obs"], _tree()["obs"])
        np.testing.assert_array_equal(tree["nested"][0], np.eye(2, dtype=np.int64))
        assert tree["note"] == "n" and bool(tree["nested"][1]["flag"])
    s.peer.close(0)
    s.receiver.close()
    if s.peer_ipc:
        os.unlink(s.peer_ipc)
