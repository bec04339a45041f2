"""TensorBoard event files without TensorFlow: a writer of scalars and text in the format TensorBoard reads.

    writer = EventWriter(run_dir / "tensorboard")         # events.out.tfevents.<time>.<host>.<pid>.<n>
    writer.scalars({"episode_return": 21.0, "sps": 900.0}, step=1024)
    writer.text("config", "<pre>{...}</pre>")
    writer.close()

``log.tensorboard=true`` turns it on: ``srljax.telemetry.metrics.MetricsLogger`` writes every metrics line
(``RUN_DIR/tensorboard/``; a single-process population's members under ``member-<i>/``, a distributed one's in
each member's own folder) and the config, ``srljax.evaluation.evaluator.EvalBook`` every evaluation
(``RUN_DIR/tensorboard/eval/``, its own run: it is written beside the metrics, by another process in a distributed
run). Open them with ``tensorboard --logdir runs`` (``pip install -e '.[tensorboard]'``).

The format: a file of TFRecords (length, masked CRC-32C of the length, the bytes, their masked CRC-32C), each an
``Event`` protocol buffer (``tensorflow/core/util/event.proto``) encoded here by hand: wall time, step and a
``Summary`` of ``simple_value`` scalars, or one text tensor (the text plugin's). About 100 lines, so the feature needs
no package: tensorboardX would pull in protobuf code generation for what these few fields need. The tests read the
files back with TensorBoard's own reader (``tensorboard.backend.event_processing``).
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path

_COUNTER = itertools.count()


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as TFRecord files checksum their records."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> bytes:
    crc = crc32c(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def record(data: bytes) -> bytes:
    """One TFRecord: ``uint64 length, uint32 masked crc(length), data, uint32 masked crc(data)``."""
    length = struct.pack("<Q", len(data))
    return length + _masked(length) + data + _masked(data)


# -- protocol buffer wire format: only what an Event needs ---------------------------------------------------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 as protobuf encodes a negative one
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # length-delimited (wire type 2)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, *, summary: bytes = b"", file_version: str = "") -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(step)  # wall_time, step
    if file_version:
        out += _field(3, file_version.encode())
    if summary:
        out += _field(5, summary)
    return out


def _scalar_value(tag: str, value: float) -> bytes:  # Summary.Value{tag=1, simple_value=2 (float)}
    return _field(1, _field(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value))


def _text_value(tag: str, text: str) -> bytes:
    """Summary.Value{tag=1, metadata=9 {plugin_data=1 {plugin_name=1 "text"}}, tensor=8 {dtype=1 DT_STRING (7),
    tensor_shape=2 {} (a scalar), string_val=8}}: what TensorBoard's text plugin reads."""
    metadata = _field(1, _field(1, b"text"))
    tensor = _varint(1 << 3) + _varint(7) + _field(2, b"") + _field(8, text.encode())
    return _field(1, _field(1, tag.encode()) + _field(9, metadata) + _field(8, tensor))


def number(value: object) -> float | None:
    """A metrics value as a float: numbers (bools too) and the strings ``metrics.jsonl`` keeps for NaN and
    infinities; None for anything else (names, lists)."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return None


class EventWriter:
    """Appends events to a new file in ``folder`` (one file per writer, so a resumed run or a second process
    writing the same folder never interleaves records); each write is flushed, so a killed run keeps its events."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_COUNTER)}"
        self.path = self.folder / name
        self._file = self.path.open("ab")
        self._write(_event(time.time(), 0, file_version="brain.Event:2"))

    def _write(self, event: bytes) -> None:
        self._file.write(record(event))
        self._file.flush()

    def scalars(self, values: Mapping[str, object], step: int, wall_time: float | None = None) -> int:
        """Every value ``number`` reads of ``values`` as a scalar at ``step``, in one event; returns how many."""
        parts = [_scalar_value(tag, x) for tag, v in values.items() if (x := number(v)) is not None]
        if parts:
            self._write(_event(time.time() if wall_time is None else wall_time, int(step), summary=b"".join(parts)))
        return len(parts)

    def text(self, tag: str, text: str, step: int = 0) -> None:
        self._write(_event(time.time(), int(step), summary=_text_value(tag, text)))

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
