"""Codec: round trips, zero-copy, and every rejection reason."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack
import numpy as np
import pytest
import zmq

from srljax.comm.codec import (
    SCHEMA_VERSION,
    WIRE_DTYPES,
    DecodeError,
    DropCounter,
    decode,
    encode,
    register_namedtuple,
)

TRIAL = "exp/t0"


class Step(NamedTuple):  # registered below: comes back as Step
    obs: Any
    reward: Any


class Loose(NamedTuple):  # never registered: comes back as a dict
    a: Any
    b: Any


register_namedtuple(Step, "test_comm_codec.Step")


def assert_same(a: Any, b: Any) -> None:
    """Equal values *and* equal types/dtypes/shapes, recursively."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and (a == b or (a != a and b != b))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b


def roundtrip(tree: Any, **kw: Any) -> Any:
    frames = encode("k", TRIAL, tree, **kw)
    return decode([bytes(f) for f in frames], TRIAL).tree


def sample_tree() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    arrays = {}
    for name in WIRE_DTYPES:
        for shape in [(), (0,), (3, 0, 2), (7,), (2, 3, 4)]:
            x = rng.integers(0, 2 if name == "bool" else 100, size=shape).astype(name)
            arrays[f"{name}{shape}"] = x
    return {
        "arrays": arrays,
        "nested": [np.float32(1.5), np.int64(-7), np.bool_(True), (None, True, 3, 2.5, "s", b"raw")],
        "step": Step(obs=np.zeros((2, 84, 84), np.uint8), reward={"r": np.ones(2, np.float32)}),
        3: {"int key": [], "empty": {}, "tuple": ()},
        "nan": np.array([np.nan, np.inf], np.float16),
    }


def test_roundtrip_nested_all_dtypes_and_shapes() -> None:
    tree = sample_tree()
    assert_same(roundtrip(tree), tree)


def test_header_fields_roundtrip() -> None:
    frames = encode("sample", TRIAL, {"x": np.arange(3)}, version=42, meta={"actor": 3, "tags": ("a", 1)})
    msg = decode(frames, TRIAL, {"sample"})
    assert (msg.kind, msg.trial, msg.version) == ("sample", TRIAL, 42)
    assert msg.meta == {"actor": 3, "tags": ["a", 1]}  # msgpack turns tuples into lists
    assert decode(encode("c", TRIAL), TRIAL).tree is None and len(encode("c", TRIAL)) == 1


def test_non_contiguous_and_big_endian_inputs() -> None:
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    out = roundtrip({"t": base.T, "s": base[::2, 1::3], "be": base.astype(">f4")})
    assert_same(out["t"], np.ascontiguousarray(base.T))
    assert_same(out["s"], np.ascontiguousarray(base[::2, 1::3]))
    assert out["be"].dtype == np.dtype("<f4")
    np.testing.assert_array_equal(out["be"], base)


def test_namedtuples_registered_unregistered_and_overridden() -> None:
    tree = {"s": Step(np.ones(1), 2.0), "l": Loose(1, np.zeros(2))}
    out = roundtrip(tree)
    assert_same(out["s"], tree["s"])
    assert type(out["l"]) is dict and list(out["l"]) == ["a", "b"]
    plain = decode(encode("k", TRIAL, tree), TRIAL, namedtuples={})
    assert type(plain.tree["s"]) is dict


def test_registry_refuses_name_clash_and_non_namedtuples() -> None:
    with pytest.raises(ValueError):
        register_namedtuple(Loose, "test_comm_codec.Step")
    with pytest.raises(TypeError):
        register_namedtuple(tuple)


def test_zero_copy_both_ways() -> None:
    arr = np.arange(1000, dtype=np.int32)
    frames = encode("k", TRIAL, {"a": arr})
    assert np.shares_memory(np.frombuffer(frames[1], np.int32), arr)  # send side: no copy
    received = [frames[0], bytearray(bytes(frames[1]))]
    out = decode(received, TRIAL).tree["a"]
    received[1][:4] = b"\xff\xff\xff\xff"  # the decoded array is a view of the frame buffer
    assert out[0] == -1 and out.base is not None


def test_zero_copy_over_zmq_frames() -> None:
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://zc")
        b.connect("inproc://zc")
        a.send_multipart(encode("k", TRIAL, np.ones((256, 1024), np.uint8)), copy=False)
        frames = b.recv_multipart(copy=False)
        out = decode(frames, TRIAL).tree
        assert out.ctypes.data == np.frombuffer(frames[1].buffer, np.uint8).ctypes.data
        assert out.sum() == 256 * 1024
    finally:
        a.close(0)
        b.close(0)
        ctx.term()


@pytest.mark.parametrize("bad", [np.array([1 + 2j]), np.array(["s"]), np.array([object()]), {1.5: 1}, {True: 1},
                                 object(), {1, 2}, np.zeros(2, np.float128 if hasattr(np, "float128") else "V8")])
def test_encode_rejects_unsupported(bad: Any) -> None:
    with pytest.raises(TypeError):
        encode("k", TRIAL, bad)


def test_encode_rejects_array_in_meta_and_huge_ints() -> None:
    with pytest.raises(TypeError):
        encode("k", TRIAL, None, meta={"a": np.zeros(2)})
    with pytest.raises(TypeError):
        encode("k", TRIAL, 2**70)
    with pytest.raises(TypeError):  # msgpack would pack it, but the receiver could not unpack it
        encode("k", TRIAL, None, meta={"payload": {"ok": [{1: "int key"}]}})


def _rehead(frames: list[Any], **changes: Any) -> list[Any]:
    header = msgpack.unpackb(frames[0])
    header.update(changes)
    return [msgpack.packb(header), *frames[1:]]


def _cases() -> list[tuple[str, Any, str]]:
    good = encode("sample", TRIAL, {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": np.zeros(0)})
    spec = msgpack.unpackb(good[0])["arrays"]
    return [
        ("no frames", [], "frames"),
        ("not msgpack", [b"\xc1garbage", *good[1:]], "malformed"),
        ("truncated header", [good[0][:-3], *good[1:]], "malformed"),
        ("header not a map", [msgpack.packb([1, 2]), *good[1:]], "malformed"),
        ("no schema", [msgpack.packb({"kind": "sample"}), *good[1:]], "malformed"),
        ("schema as bool", _rehead(good, schema=True), "malformed"),
        ("wrong schema", _rehead(good, schema=SCHEMA_VERSION + 1), "schema"),
        ("foreign trial", _rehead(good, trial="other/t0"), "foreign_trial"),
        ("wrong kind", _rehead(good, kind="params"), "kind"),
        ("version not int", _rehead(good, version="3"), "malformed"),
        ("missing frame", good[:-1], "frames"),
        ("extra frame", [*good, b""], "frames"),
        ("unknown dtype", _rehead(good, arrays=[["complex64", [2, 3]], spec[1]]), "dtype"),
        ("object dtype", _rehead(good, arrays=[["object", [2, 3]], spec[1]]), "dtype"),
        ("short buffer", [good[0], bytes(good[1])[:-1], good[2]], "size"),
        ("wrong shape", _rehead(good, arrays=[["float32", [3, 3]], spec[1]]), "size"),
        ("negative dim", _rehead(good, arrays=[["float32", [-2, -3]], spec[1]]), "malformed"),
        ("bad treedef", _rehead(good, treedef=["q"]), "malformed"),
        ("treedef too few leaves", _rehead(good, treedef=["a"]), "malformed"),
        ("treedef too many leaves", _rehead(good, treedef=["l", [["a"], ["a"], ["a"]]]), "malformed"),
        ("treedef too deep", _rehead(good, treedef=_deep(200)), "malformed"),
        ("bad scalar size", _rehead(good, treedef=["s", "float32", b"\x00"]), "size"),
        ("bad scalar dtype", _rehead(good, treedef=["s", "complex64", b"\x00" * 8]), "dtype"),
        ("bad dict key", _rehead(good, treedef=["d", [1.5], [["a"]]]), "malformed"),
    ]


def _deep(n: int) -> list[Any]:
    node: list[Any] = ["v", 1]
    for _ in range(n):
        node = ["l", [node]]
    return node


@pytest.mark.parametrize("name,frames,reason", _cases(), ids=[c[0] for c in _cases()])
def test_decode_rejections(name: str, frames: list[Any], reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(frames, TRIAL, {"sample"})
    assert info.value.reason == reason, (name, str(info.value))


def test_drop_counter() -> None:
    drops = DropCounter()
    drops.add(DecodeError("schema"))
    drops.add("schema")
    drops.add("malformed", 3)
    assert drops == {"schema": 2, "malformed": 3} and drops.total() == 5


def test_pack_round_trips_every_part_aligned_without_copy() -> None:
    from srljax.comm.codec import PACK_ALIGN, pack, unpack

    tree = {"a": np.arange(7, dtype=np.uint8), "b": np.zeros((0, 3), np.float32), "c": np.ones((5, 3), np.float64),
            "s": "text"}
    frames = encode("sample", "exp/t0", tree, version=2)
    packed = pack(frames)
    parts = unpack(packed)
    assert [bytes(p) for p in parts] == [bytes(memoryview(f)) for f in frames]
    base = np.frombuffer(packed, np.uint8).ctypes.data
    assert all((np.frombuffer(p, np.uint8).ctypes.data - base) % PACK_ALIGN == 0 for p in parts if p.nbytes)
    msg = decode(parts, "exp/t0")
    np.testing.assert_array_equal(msg.tree["c"], tree["c"])
    assert msg.tree["b"].shape == (0, 3) and msg.tree["s"] == "text" and msg.version == 2
    assert np.shares_memory(msg.tree["c"], np.frombuffer(packed, np.uint8))  # views of the one frame
    assert len(unpack(pack(encode("ping", "exp/t0")))) == 1  # a header alone
