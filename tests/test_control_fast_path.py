"""``ControlServer.poll`` checks a control message in one pass over its header (the controller's hot
path); every message must come out as the codec's generic ``decode`` + ``_unpack`` would have it:
the same ControlMessage, or dropped for the same reason."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import msgpack
import zmq

from srljax.comm import ControlServer, make_socket
from srljax.comm.codec import SCHEMA_VERSION, DecodeError, decode
from srljax.comm.control import TO_CONTROLLER, ControlMessage, _unpack

TRIAL = "exp/t0"
GOOD = {"kind": "heartbeat", "trial": TRIAL, "schema": SCHEMA_VERSION, "version": -1,
        "meta": {"worker": "exp/t0/actor/3", "payload": {"state": "running", "seq": 4, "sent": 1.5}},
        "treedef": ["v", None], "arrays": []}


def _variant(**changes: Any) -> list[bytes]:
    return [msgpack.packb({**GOOD, **changes}, use_bin_type=True)]


CASES: list[list[bytes]] = [
    _variant(),
    _variant(kind="status", version=7, meta={"worker": "exp/t0/trainer/0", "payload": {"a": [1, {"b": None}]}}),
    _variant(extra="ignored"),  # unknown header fields are ignored by both
    _variant(kind="configure"),  # not a kind the controller receives
    _variant(trial="exp/t1"), _variant(trial=b"exp/t0"),
    _variant(schema=SCHEMA_VERSION + 1), _variant(schema=True), _variant(version=True), _variant(version=1.0),
    _variant(treedef=["v", 1]), _variant(treedef=["l", []]), _variant(treedef=None),
    _variant(arrays=[["float32", [2]]]), [*_variant(arrays=[["float32", [2]]]), b"\0" * 8],
    [*_variant(), b"extra"],
    _variant(meta={"worker": 3, "payload": {}}), _variant(meta={"worker": "w"}), _variant(meta=[]),
    _variant(meta={"worker": "w", "payload": [1]}),
    [b""], [b"\xc1garbage"], [msgpack.packb([1, 2])], [GOOD["trial"].encode()],
]


def _expected(frames: list[bytes]) -> ControlMessage | str:
    try:
        msg = decode(frames, TRIAL, TO_CONTROLLER)
        return _unpack(msg)
    except DecodeError as err:
        return err.reason


def test_poll_agrees_with_the_generic_decode() -> None:
    ctx = zmq.Context()
    try:
        with ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx) as server:
            peer = make_socket(ctx, zmq.DEALER)
            peer.connect(server.address)
            for frames in CASES:
                peer.send_multipart(frames)
            expected = [_expected(frames) for frames in CASES]
            want_messages = [e for e in expected if isinstance(e, ControlMessage)]
            want_drops = Counter(e for e in expected if isinstance(e, str))
            got: list[ControlMessage] = []
            deadline = time.monotonic() + 10
            while (len(got) < len(want_messages) or server.drops.total() < sum(want_drops.values())) \
                    and time.monotonic() < deadline:
                got += server.poll(timeout_ms=100)
            assert got == want_messages
            assert dict(server.drops) == dict(want_drops)
            assert server.counts["received"] == len(want_messages)
            assert set(server.routes) == {m.worker for m in want_messages}
            peer.close(linger=0)
    finally:
        ctx.term()
