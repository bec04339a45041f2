"""Name resolution: ``<experiment>/<trial>/<role>/<index>`` -> address, with optional TTL.

Workers bind, then publish where they can be reached; peers look them up::

    names = DirectoryNames(run_dir / "names")           # or MemoryNames() in one process
    names.add(worker_key("exp", "t0", "policy", 0), server.address, ttl=30)
    addr = names.wait(worker_key("exp", "t0", "policy", 0), timeout=60)
    names.list("exp/t0/actor/")                          # {key: address} of live actors

An entry with a TTL disappears ``ttl`` seconds after it was (re)added; re-``add`` it as a
heartbeat. ``DirectoryNames`` keeps one small JSON file per key under a shared directory
(atomic temp file + ``os.replace``), so it works across processes on one host and across hosts
on a shared filesystem; its TTL uses wall-clock time, so hosts need roughly synchronised clocks.
``ServedNames`` (``srljax/comm/served_names.py``) asks the controller instead
(``layout.names=controller``), for trials too large for one file per name.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote


class NameNotFound(KeyError):
    """No live entry for this key (never added, deleted, expired, or ``wait`` timed out)."""


class NameExists(KeyError):
    """``add(..., replace=False)`` found a live entry."""


def worker_key(experiment: str, trial: str, role: str, index: int | str) -> str:
    """``worker_key("exp", "t0", "actor", 3) == "exp/t0/actor/3"``."""
    return check_key(f"{experiment}/{trial}/{role}/{index}")


def check_key(key: str) -> str:
    """Keys are ``/``-separated non-empty segments without control characters, ``.`` or ``..``."""
    segments = key.split("/") if isinstance(key, str) else [""]
    if any(s in ("", ".", "..") or not s.isprintable() for s in segments) or len(key) > 200:
        raise ValueError(f"bad name key {key!r}")
    return key


class NameResolver(ABC):
    """The interface every backend implements; values are strings (addresses)."""

    @abstractmethod
    def add(self, key: str, value: str, ttl: float | None = None, replace: bool = True) -> None:
        """Set ``key``; with ``replace=False`` raise ``NameExists`` if a live entry is there."""

    @abstractmethod
    def get(self, key: str) -> str:
        """The live value, else ``NameNotFound``."""

    @abstractmethod
    def list(self, prefix: str = "") -> dict[str, str]:
        """Live entries whose key starts with ``prefix`` (a plain string prefix)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    def clear(self, prefix: str) -> None:
        """Remove every entry (live or expired) whose key starts with ``prefix``."""
        for key in self._all_keys(prefix):
            self.delete(key)

    def wait(self, key: str, timeout: float | None = None, poll_s: float = 0.05) -> str:
        """Poll until ``key`` is live; ``NameNotFound`` after ``timeout`` seconds (None: forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return self.get(key)
            except NameNotFound:
                if deadline is not None and time.monotonic() >= deadline:
                    raise NameNotFound(f"{key} (waited {timeout}s)") from None
                time.sleep(poll_s)

    @abstractmethod
    def _all_keys(self, prefix: str) -> list[str]: ...

    def for_worker(self, worker: Any) -> NameResolver:
        """The resolver ``worker`` uses: itself, or for names the controller serves
        (``srljax/comm/served_names.py``) one that asks over the worker's control channel."""
        return self


class MemoryNames(NameResolver):
    """Thread-safe in-process names (single-process layouts and tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, float | None]] = {}  # key -> (value, monotonic expiry)

    def _live(self, key: str, now: float) -> str | None:
        entry = self._entries.get(key)
        if entry is None or (entry[1] is not None and entry[1] <= now):
            return None
        return entry[0]

    def add(self, key: str, value: str, ttl: float | None = None, replace: bool = True) -> None:
        check_key(key)
        with self._lock:
            now = time.monotonic()
            if not replace and self._live(key, now) is not None:
                raise NameExists(key)
            self._entries[key] = (str(value), None if ttl is None else now + ttl)

    def get(self, key: str) -> str:
        with self._lock:
            value = self._live(key, time.monotonic())
        if value is None:
            raise NameNotFound(key)
        return value

    def list(self, prefix: str = "") -> dict[str, str]:
        with self._lock:
            now = time.monotonic()
            live = {k: self._live(k, now) for k in self._entries if k.startswith(prefix)}
        return {k: v for k, v in sorted(live.items()) if v is not None}

    def delete(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def _all_keys(self, prefix: str) -> list[str]:
        with self._lock:
            return [k for k in self._entries if k.startswith(prefix)]


class DirectoryNames(NameResolver):
    """Names as files ``<root>/<quoted key>.json`` holding ``{"value", "expires"}`` (epoch seconds).

    Keys are percent-quoted into one flat directory, so ``a/b`` and ``a/b/c`` can coexist and
    no key can escape ``root``. Expired files are ignored on read and left in place: deleting
    them could race with a writer refreshing the same key.
    """

    SUFFIX = ".json"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        name = quote(check_key(key), safe="") + self.SUFFIX
        if len(name) > 240:  # most filesystems stop at 255 bytes; leave room for the temp suffix
            raise ValueError(f"name key too long once quoted: {key!r}")
        return self.root / name

    def _read(self, path: Path) -> str | None:
        try:
            data = json.loads(path.read_text())
            value, expires = data["value"], data["expires"]
        except (OSError, ValueError, KeyError, TypeError):  # missing, or a stray/foreign file
            return None
        if expires is not None and expires <= time.time():
            return None
        return value if isinstance(value, str) else None

    def add(self, key: str, value: str, ttl: float | None = None, replace: bool = True) -> None:
        path = self._path(key)
        body = json.dumps({"key": key, "value": str(value), "expires": None if ttl is None else time.time() + ttl})
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(body)
        try:
            if replace:
                os.replace(tmp, path)  # atomic: readers see the old or the new file, never half
                return
            try:
                os.link(tmp, path)  # atomic create-if-absent
            except FileExistsError:
                if self._read(path) is not None:
                    raise NameExists(key) from None
                os.replace(tmp, path)  # the old entry had expired
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, key: str) -> str:
        value = self._read(self._path(key))
        if value is None:
            raise NameNotFound(key)
        return value

    def list(self, prefix: str = "") -> dict[str, str]:
        out = {}
        for key in self._all_keys(prefix):
            value = self._read(self._path(key))
            if value is not None:
                out[key] = value
        return dict(sorted(out.items()))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def _all_keys(self, prefix: str) -> list[str]:
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        keys = []
        for n in names:
            key = unquote(n[: -len(self.SUFFIX)]) if n.endswith(self.SUFFIX) else ""
            if key.startswith(prefix) and _valid(key):  # skip temp files and strays
                keys.append(key)
        return keys


def _valid(key: str) -> bool:
    try:
        check_key(key)
    except ValueError:
        return False
    return True
