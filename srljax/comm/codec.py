"""Wire codec: a pytree of numpy arrays <-> multipart ZMQ frames, without pickle.

Frame 0 is a msgpack header ``{kind, trial, schema, version, meta, treedef, arrays}``; frames
1..n are the raw C-contiguous buffers of the array leaves, in depth-first order::

    frames = encode("sample", "exp/t0", {"obs": obs, "reward": rew}, version=3, meta={"actor": 0})
    sock.send_multipart(frames, copy=False)       # buffers >= 64 KiB are not copied
    msg = decode(sock.recv_multipart(copy=False), expect_trial="exp/t0", expect_kinds={"sample"})
    msg.version, msg.meta["actor"], msg.tree["obs"]

Decoded arrays are ``np.frombuffer`` views of the received frames (zero-copy): they keep the
frame alive, and are read-only when the frame is (``bytes``); ``np.array(x)`` gives a private copy.
Sent arrays are *not* copied either: do not mutate them until the message has left the socket.

Leaves: numpy arrays (dtypes in ``WIRE_DTYPES``; anything with ``__array__``, e.g. a jax.Array,
goes through ``np.asarray``), numpy scalars, and ``None``/bool/int/float/str/bytes, which ride in
the header. Containers: dict (str/int keys, order kept), list, tuple, NamedTuple. A NamedTuple
comes back as its class only if that class was registered (``register_namedtuple``) on the
receiving side; otherwise it comes back as a dict of its fields. Classes are never imported
by a name read from the wire.

Anything that does not check out raises ``DecodeError(reason)``; receivers count those in a
``DropCounter`` and carry on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

SCHEMA_VERSION = 1
MAX_DEPTH = 64  # containers nested deeper than this are refused (both ways)
MAX_NDIM = 32

# Explicitly little-endian, so hosts of either byte order agree on the bytes.
WIRE_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")
}

# Machine-readable drop reasons.
MALFORMED = "malformed"  # not msgpack, missing/ill-typed header fields, bad treedef
FRAMES = "frames"  # frame count != 1 + number of arrays
DTYPE = "dtype"  # dtype outside WIRE_DTYPES
SIZE = "size"  # buffer length != prod(shape) * itemsize
FOREIGN_TRIAL = "foreign_trial"
SCHEMA = "schema"
KIND = "kind"


class DecodeError(Exception):
    """A message that must be dropped; ``reason`` is one of the constants above (or a stream's own)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class DropCounter(Counter):
    """reason -> number of dropped messages::

        drops = DropCounter()
        try:
            msg = decode(frames, trial)
        except DecodeError as err:
            drops.add(err)
        drops["foreign_trial"], drops.total()
    """

    def add(self, reason: str | DecodeError, n: int = 1) -> None:
        self[reason.reason if isinstance(reason, DecodeError) else reason] += n


@dataclass(frozen=True, slots=True)
class Message:
    """A decoded message. ``meta`` comes back as msgpack gives it (tuples become lists)."""

    kind: str
    trial: str
    version: int
    meta: dict[str, Any] = field(default_factory=dict)
    tree: Any = None


_NAMEDTUPLES: dict[str, type] = {}


def register_namedtuple(cls: type, name: str | None = None) -> type:
    """Let ``decode`` rebuild ``cls`` (instead of a dict) on this side; also usable as a decorator::

        register_namedtuple(Trajectory)                  # wire name "Trajectory"
        register_namedtuple(Batch, "ppo.Batch")          # or an explicit one
    """
    if not (issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"{cls!r} is not a NamedTuple class")
    name = name or cls.__name__
    if _NAMEDTUPLES.get(name, cls) is not cls:
        raise ValueError(f"NamedTuple name {name!r} is already registered for {_NAMEDTUPLES[name]!r}")
    _NAMEDTUPLES[name] = cls
    return cls


def _wire_name(cls: type) -> str:
    for name, registered in _NAMEDTUPLES.items():
        if registered is cls:
            return name
    return cls.__name__


def encode(kind: str, trial: str, tree: Any = None, *, version: int = -1,
           meta: Mapping[str, Any] | None = None) -> list[Any]:
    """Frames for ``tree``: ``[header bytes, memoryview, ...]``; raises TypeError on unsupported leaves."""
    buffers: list[memoryview] = []
    specs: list[list[Any]] = []
    treedef = _flatten(tree, buffers, specs, 0)
    meta = dict(meta or {})
    _check_str_keys(meta, 0)
    header = {"kind": kind, "trial": trial, "schema": SCHEMA_VERSION, "version": int(version),
              "meta": meta, "treedef": treedef, "arrays": specs}
    try:
        head = msgpack.packb(header, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as err:  # e.g. an ndarray in meta, int > 64 bit
        raise TypeError(f"cannot encode message header: {err}") from err
    return [head, *buffers]


def _check_str_keys(x: Any, depth: int) -> None:
    """msgpack only unpacks maps with str keys (strict_map_key): refuse the rest here, not at the receiver."""
    if depth > MAX_DEPTH:
        raise TypeError(f"meta nested deeper than {MAX_DEPTH}")
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise TypeError(f"meta dict keys must be str, got {k!r}")
            _check_str_keys(v, depth + 1)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _check_str_keys(v, depth + 1)


def _flatten(x: Any, buffers: list[memoryview], specs: list[list[Any]], depth: int) -> list[Any]:
    if depth > MAX_DEPTH:
        raise TypeError(f"pytree nested deeper than {MAX_DEPTH}")
    if isinstance(x, np.ndarray):
        return _array_leaf(x, buffers, specs)
    if isinstance(x, np.generic):  # before the python scalars: np.float64 is a float
        wire = _wire_dtype(x.dtype)
        return ["s", wire.name, np.asarray(x, dtype=wire).tobytes()]
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        return ["v", x]
    if isinstance(x, dict):
        keys = list(x)
        for k in keys:
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"dict keys must be str or int on the wire, got {k!r}")
        return ["d", keys, [_flatten(x[k], buffers, specs, depth + 1) for k in keys]]
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return ["n", _wire_name(type(x)), list(type(x)._fields), [_flatten(v, buffers, specs, depth + 1) for v in x]]
    if isinstance(x, (tuple, list)):
        return ["t" if isinstance(x, tuple) else "l", [_flatten(v, buffers, specs, depth + 1) for v in x]]
    if hasattr(x, "__array__"):  # jax.Array and friends: one device->host copy
        return _array_leaf(np.asarray(x), buffers, specs)
    raise TypeError(f"cannot put {type(x).__name__} on the wire")


def _wire_dtype(dtype: np.dtype) -> np.dtype:
    wire = WIRE_DTYPES.get(dtype.name)
    if wire is None:
        raise TypeError(f"dtype {dtype} is not allowed on the wire (allowed: {', '.join(WIRE_DTYPES)})")
    return wire


def _array_leaf(arr: np.ndarray, buffers: list[memoryview], specs: list[list[Any]]) -> list[Any]:
    wire = _wire_dtype(arr.dtype)
    if arr.dtype != wire:  # big-endian input
        arr = arr.astype(wire)
    if not arr.flags.c_contiguous:  # (not np.ascontiguousarray: it turns 0-d into 1-d)
        arr = arr.copy(order="C")
    specs.append([wire.name, list(arr.shape)])
    buffers.append(memoryview(arr.reshape(-1).view(np.uint8)))
    return ["a"]


PACK_ALIGN = 16  # each part of a packed frame starts at a multiple of this (arrays come back aligned)
PACK_MAX_PARTS = 4096
_PACK_HEAD = np.dtype("<u4")
_PACK_SIZES = np.dtype("<u8")


def _aligned(offset: int) -> int:
    return -(-offset // PACK_ALIGN) * PACK_ALIGN


def packed_bound(message_bytes: int) -> int:
    """The largest frame ``pack`` makes of a message of at most ``message_bytes`` (its frames together): the
    part table and each part's alignment padding, for up to ``PACK_MAX_PARTS`` parts."""
    return message_bytes + _PACK_HEAD.itemsize + PACK_MAX_PARTS * (_PACK_SIZES.itemsize + PACK_ALIGN)


def pack(frames: Sequence[Any]) -> bytes:
    """``encode``'s frames as ONE frame: the part count (u4), each part's size (u8), then the parts, each at a
    multiple of ``PACK_ALIGN``. One copy at the sender; ``unpack`` gives the parts back without copying.

    Why: libzmq 4.3.5 aborts the whole process (``Assertion failed: !_more (src/fq.cpp)``, or
    ``Resource temporarily unavailable (src/session_base.cpp)``) when a peer goes away while a multipart
    message is between it and a client socket; a one-frame message cannot be torn that way."""
    views = [memoryview(f).cast("B") for f in frames]
    offset = _PACK_HEAD.itemsize + _PACK_SIZES.itemsize * len(views)
    starts = []
    for view in views:
        offset = _aligned(offset)
        starts.append(offset)
        offset += view.nbytes
    out = bytearray(offset)
    out[:_PACK_HEAD.itemsize] = np.array(len(views), _PACK_HEAD).tobytes()
    out[_PACK_HEAD.itemsize:_PACK_HEAD.itemsize + _PACK_SIZES.itemsize * len(views)] = \
        np.array([v.nbytes for v in views], _PACK_SIZES).tobytes()
    for start, view in zip(starts, views):
        out[start:start + view.nbytes] = view
    return bytes(out)


def unpack(frame: Any) -> list[memoryview]:
    """``pack``'s parts as views of ``frame`` (no copy); ``DecodeError`` if its layout does not add up."""
    buf = memoryview(frame).cast("B")
    if buf.nbytes < _PACK_HEAD.itemsize:
        raise DecodeError(FRAMES, "a packed frame shorter than its part count")
    count = int(np.frombuffer(buf[:_PACK_HEAD.itemsize], _PACK_HEAD)[0])
    table_end = _PACK_HEAD.itemsize + _PACK_SIZES.itemsize * count
    if not 1 <= count <= PACK_MAX_PARTS or buf.nbytes < table_end:
        raise DecodeError(FRAMES, f"a packed frame of {count} parts in {buf.nbytes} bytes")
    sizes = np.frombuffer(buf[_PACK_HEAD.itemsize:table_end], _PACK_SIZES)
    parts, offset = [], table_end
    for size in sizes.tolist():
        offset = _aligned(offset)
        if offset + size > buf.nbytes:
            raise DecodeError(FRAMES, f"a packed frame's parts need more than its {buf.nbytes} bytes")
        parts.append(buf[offset:offset + size])
        offset += size
    if offset != buf.nbytes:
        raise DecodeError(FRAMES, f"a packed frame with {buf.nbytes - offset} bytes after its parts")
    return parts


def decode(frames: Sequence[Any], expect_trial: str, expect_kinds: Collection[str] | None = None, *,
           namedtuples: Mapping[str, type] | None = None) -> Message:
    """Check and rebuild a message; raises only ``DecodeError``.

    ``frames``: zmq Frames, bytes, bytearray or memoryviews. ``namedtuples`` overrides the
    registry of NamedTuple classes (default: those passed to ``register_namedtuple``).
    """
    try:
        return _decode(frames, expect_trial, expect_kinds, _NAMEDTUPLES if namedtuples is None else namedtuples)
    except DecodeError:
        raise
    except Exception as err:  # anything else a hostile frame provokes is still just a bad message
        raise DecodeError(MALFORMED, repr(err)) from err


def _decode(frames: Sequence[Any], expect_trial: str, expect_kinds: Collection[str] | None,
            namedtuples: Mapping[str, type]) -> Message:
    if len(frames) < 1:
        raise DecodeError(FRAMES, "no frames")
    try:
        header = msgpack.unpackb(memoryview(frames[0]), raw=False)
    except Exception as err:
        raise DecodeError(MALFORMED, f"header is not msgpack: {err}") from err
    if not isinstance(header, dict):
        raise DecodeError(MALFORMED, "header is not a map")
    schema = header.get("schema")
    if type(schema) is not int:
        raise DecodeError(MALFORMED, "header has no integer schema")
    if schema != SCHEMA_VERSION:  # checked first: another schema may lay out the rest differently
        raise DecodeError(SCHEMA, f"schema {schema}, expected {SCHEMA_VERSION}")
    kind, trial, version, meta = header.get("kind"), header.get("trial"), header.get("version"), header.get("meta")
    treedef, specs = header.get("treedef"), header.get("arrays")
    if not (isinstance(kind, str) and isinstance(trial, str) and type(version) is int and isinstance(meta, dict)
            and isinstance(specs, list)):
        raise DecodeError(MALFORMED, "header fields missing or of the wrong type")
    if trial != expect_trial:
        raise DecodeError(FOREIGN_TRIAL, f"trial {trial[:80]!r}")
    if expect_kinds is not None and kind not in expect_kinds:
        raise DecodeError(KIND, f"kind {kind[:40]!r}")
    if len(frames) != 1 + len(specs):
        raise DecodeError(FRAMES, f"{len(frames)} frames for {len(specs)} arrays")
    arrays = [_rebuild_array(spec, frames[i + 1]) for i, spec in enumerate(specs)]
    leaves = iter(arrays)
    tree = _unflatten(treedef, leaves, namedtuples, 0)
    if next(leaves, None) is not None:
        raise DecodeError(MALFORMED, "treedef uses fewer arrays than were sent")
    return Message(kind=kind, trial=trial, version=version, meta=meta, tree=tree)


def _rebuild_array(spec: Any, frame: Any) -> np.ndarray:
    if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], list)):
        raise DecodeError(MALFORMED, "bad array spec")
    name, shape = spec
    dtype = WIRE_DTYPES.get(name)
    if dtype is None:
        raise DecodeError(DTYPE, f"dtype {name[:20]!r}")
    if len(shape) > MAX_NDIM or any(type(d) is not int or d < 0 for d in shape):
        raise DecodeError(MALFORMED, "bad shape")
    buf = memoryview(frame)
    if buf.nbytes != math.prod(shape) * dtype.itemsize:
        raise DecodeError(SIZE, f"{buf.nbytes} bytes for {name}{tuple(shape)}")
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def _unflatten(node: Any, leaves: Any, namedtuples: Mapping[str, type], depth: int) -> Any:
    if depth > MAX_DEPTH or not isinstance(node, list) or not node:
        raise DecodeError(MALFORMED, "bad treedef node")
    tag, n = node[0], len(node)
    if tag == "a" and n == 1:
        leaf = next(leaves, None)
        if leaf is None:
            raise DecodeError(MALFORMED, "treedef uses more arrays than were sent")
        return leaf
    if tag == "v" and n == 2 and (node[1] is None or isinstance(node[1], (bool, int, float, str, bytes))):
        return node[1]
    if tag == "s" and n == 3 and isinstance(node[1], str) and isinstance(node[2], bytes):
        dtype = WIRE_DTYPES.get(node[1])
        if dtype is None:
            raise DecodeError(DTYPE, f"dtype {node[1][:20]!r}")
        if len(node[2]) != dtype.itemsize:
            raise DecodeError(SIZE, "numpy scalar of the wrong size")
        return np.frombuffer(node[2], dtype=dtype)[0]
    if tag in ("l", "t") and n == 2 and isinstance(node[1], list):
        items = [_unflatten(c, leaves, namedtuples, depth + 1) for c in node[1]]
        return tuple(items) if tag == "t" else items
    if tag == "d" and n == 3 and _pairs(node[1], node[2]):
        if any(isinstance(k, bool) or not isinstance(k, (str, int)) for k in node[1]):
            raise DecodeError(MALFORMED, "bad dict key")
        return {k: _unflatten(c, leaves, namedtuples, depth + 1) for k, c in zip(node[1], node[2])}
    if tag == "n" and n == 4 and isinstance(node[1], str) and _pairs(node[2], node[3]):
        if not all(isinstance(f, str) for f in node[2]):
            raise DecodeError(MALFORMED, "bad NamedTuple field")
        values = [_unflatten(c, leaves, namedtuples, depth + 1) for c in node[3]]
        cls = namedtuples.get(node[1])
        if cls is None:
            return dict(zip(node[2], values))
        if tuple(node[2]) != tuple(cls._fields):  # the two sides disagree about the type
            raise DecodeError(MALFORMED, f"fields of {node[1]!r} differ from the registered class")
        return cls(*values)
    raise DecodeError(MALFORMED, f"bad treedef node {str(tag)[:10]!r}")


def _pairs(keys: Any, children: Any) -> bool:
    return isinstance(keys, list) and isinstance(children, list) and len(keys) == len(children)
