"""Names served by one process (the controller) and asked for over the control channel.

    store = MemoryNames()                                   # the controller's; Controller._tick answers
    reply = answer(store, {"op": "get", "key": "exp/t0/policy/3/inference", "id": 7})   # {"id": 7, "ok": True, ...}

    names = ServedNames(bootstrap, direct={"exp/t0/controller/0"})   # what a backend hands a worker
    names = names.for_worker(worker)      # Worker.__init__: requests ride its control channel (``worker.ask_controller``)
    names.add("exp/t0/policy/3/inference", addr); names.get(...); names.list("exp/t0/actor/")

``ServedNames`` is a ``NameResolver`` like ``MemoryNames`` and ``DirectoryNames`` (same errors:
``NameNotFound``, ``NameExists``, ``ValueError`` for a bad key; TTLs). Only the keys in ``direct``
(the controller's address, which a worker needs before it can ask anything) are read from
``bootstrap`` (the run folder, or memory); every other call is a ``names`` message to the
controller and its ``names_reply``, on the connection the worker holds anyway. So a trial of
10,000 workers keeps one file in the shared folder instead of one per worker and stream, adds no
connection, handshake or file descriptor to the controller, gets CURVE and the sender checks of the
control channel, and a ``list`` is a scan of a dict in one process instead of a directory.
Within the trial any worker may add any key, as with the shared folder.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from srljax.comm.names import MemoryNames, NameExists, NameNotFound, NameResolver, check_key

OPS = ("add", "get", "list", "delete", "keys")
REQUEST_TIMEOUT_S = 60.0  # a request unanswered this long: the controller is gone or far behind


class NameServiceError(RuntimeError):
    """The controller did not answer a names request; the message says what to check."""


def answer(store: MemoryNames, request: dict[str, Any]) -> dict[str, Any]:
    """The reply to one request ``{"op", "id", "key" | "prefix", "value", "ttl", "replace"}`` from ``store``.
    A malformed request gets ``{"ok": False, "error": "bad_request", "detail": ...}``; nothing raises."""
    op, key = request.get("op"), request.get("key")
    out: dict[str, Any] = {"id": request.get("id")}
    try:
        if op not in OPS:
            raise ValueError(f"unknown op {str(op)[:20]!r} (one of {', '.join(OPS)})")
        if op in ("add", "get", "delete") and not isinstance(key, str):
            raise ValueError(f"bad name key {str(key)[:80]!r}")
        if op == "add":
            value, ttl, replace = request.get("value"), request.get("ttl"), request.get("replace", True)
            if not isinstance(value, str) or not isinstance(replace, bool) or not (
                    ttl is None or (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl >= 0)):
                raise ValueError("add needs a str value, a ttl >= 0 or None, and a bool replace")
            store.add(key, value, ttl=ttl, replace=replace)
        elif op == "get":
            out["value"] = store.get(key)
        elif op == "delete":
            store.delete(key)
        else:
            prefix = request.get("prefix", "")
            if not isinstance(prefix, str):
                raise ValueError("list and keys need a str prefix")
            if op == "list":
                out["entries"] = store.list(prefix)
            else:
                out["keys"] = store._all_keys(prefix)
    except NameNotFound:
        return {**out, "ok": False, "error": "not_found"}
    except NameExists:
        return {**out, "ok": False, "error": "exists"}
    except ValueError as err:
        return {**out, "ok": False, "error": "bad_request", "detail": str(err)[:300]}
    return {**out, "ok": True}


class ServedNames(NameResolver):
    """A ``NameResolver`` whose entries the controller keeps; ``ask(request, timeout_s) -> reply`` carries a call."""

    def __init__(self, bootstrap: NameResolver, direct: Collection[str] = (), *,
                 ask: Callable[[dict[str, Any], float], dict[str, Any]] | None = None,
                 timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.bootstrap, self.direct, self.timeout_s = bootstrap, frozenset(direct), timeout_s
        self._ask = ask

    def for_worker(self, worker: Any) -> ServedNames:
        return ServedNames(self.bootstrap, self.direct, ask=worker.ask_controller, timeout_s=self.timeout_s)

    def _call(self, op: str, **fields: Any) -> dict[str, Any]:
        if self._ask is None:
            raise NameServiceError("names served by the controller (layout.names=controller) are asked for over a "
                                   "worker's control channel: use the resolver of a Worker (worker.names)")
        reply = self._ask({"op": op, **fields}, self.timeout_s)
        if reply.get("ok") is True:
            return reply
        error = reply.get("error")
        if error == "not_found":
            raise NameNotFound(fields.get("key", ""))
        if error == "exists":
            raise NameExists(fields.get("key", ""))
        raise ValueError(f"the controller refused names {op} {fields.get('key', '')!r}: {reply.get('detail', error)}")

    def add(self, key: str, value: str, ttl: float | None = None, replace: bool = True) -> None:
        if key in self.direct:
            self.bootstrap.add(key, value, ttl=ttl, replace=replace)
            return
        self._call("add", key=check_key(key), value=str(value), ttl=ttl, replace=replace)

    def get(self, key: str) -> str:
        if key in self.direct:
            return self.bootstrap.get(key)
        return str(self._call("get", key=key)["value"])

    def list(self, prefix: str = "") -> dict[str, str]:
        return dict(sorted(self._call("list", prefix=prefix)["entries"].items()))

    def delete(self, key: str) -> None:
        if key in self.direct:
            self.bootstrap.delete(key)
            return
        self._call("delete", key=key)

    def _all_keys(self, prefix: str) -> list[str]:
        return [str(k) for k in self._call("keys", prefix=prefix)["keys"]]
