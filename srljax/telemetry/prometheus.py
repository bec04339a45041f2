"""Prometheus endpoints, the trial's ``file_sd`` targets file, and scraping them back.

    exporter = Exporter(port=0, host="127.0.0.1")      # port 0: any free port; exporter.address "127.0.0.1:41233"
    exporter.set("episode_return", 21.0)               # a gauge srljax_train_episode_return
    exporter.add_collector(lambda: families)           # metric families built at scrape time
    write_targets(run_dir, [Target("127.0.0.1:41233", {"experiment": "pong", "trial": "t0",
                                                       "role": "actor", "index": "0"})])
    read_targets(run_dir)                              # the same list, from RUN_DIR/prometheus_targets.json
    scrape("127.0.0.1:41233")                          # {family name: Family}, parsed text format

One HTTP endpoint per worker (``srljax/telemetry/exporter.py`` fills it), the single-process loop's
from ``srljax.telemetry.metrics.MetricsLogger``. ``RUN_DIR/prometheus_targets.json`` is a Prometheus
``file_sd`` file (a JSON list of ``{"targets": [...], "labels": {...}}``), rewritten atomically
whenever a worker comes back at a new port, so a user's Prometheus scrapes the whole trial with

    file_sd_configs: [{files: ["/abs/path/runs/EXP/TRIAL/prometheus_targets.json"]}]

An endpoint holds at most ``MAX_CONNECTIONS`` connections at once, each with a thread for its life: a
connection past them is closed unread (``Exporter.refused`` counts them), a read that waits ``READ_TIMEOUT_S``
ends its connection, and one that is still open ``CONNECTION_S`` after it was accepted is shut (a peer dripping
a byte at a time); so a neighbour opening connections cannot grow a worker's threads or keep its scrapes out
for long (prometheus_client's own server holds a thread per connection with no timeout).
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import HTTPServer
from pathlib import Path
from typing import Any

TARGETS_FILE = "prometheus_targets.json"
SCRAPE_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 8  # connections one endpoint serves at once (a thread each)
READ_TIMEOUT_S = 5.0  # a connection whose peer sends nothing for this long is closed
CONNECTION_S = 10.0  # a connection still open this long after it was accepted is shut


def metric_name(key: str) -> str:
    """``"queue/pending_rows"`` -> ``"queue_pending_rows"``: a Prometheus-safe name part."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in key)
    return "_" + name if name[:1].isdigit() else name


class _Families:
    """A collector that asks a function for its families at every scrape."""

    def __init__(self, collect: Callable[[], Iterable[Any]]):
        self._collect = collect

    def collect(self) -> Iterable[Any]:
        try:
            return list(self._collect())
        except Exception:  # noqa: BLE001 - a scrape must not take the worker (or the endpoint) down
            return []


class BoundedServer(socketserver.ThreadingMixIn, HTTPServer):
    """An HTTP server with at most ``MAX_CONNECTIONS`` connection threads, each connection closed after
    ``CONNECTION_S`` (checked every ``poll_interval`` by ``serve_forever``) and reads timed out by the handler."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # listen backlog: a flood's connections are accepted (and refused) rather than left
    # half-open in the kernel, where a scrape behind them would wait for TCP's retransmits

    def __init__(self, address: tuple[str, int], handler: Any, *, max_connections: int = MAX_CONNECTIONS,
                 connection_s: float = CONNECTION_S):
        self.slots = threading.BoundedSemaphore(max_connections)
        self.connection_s = connection_s
        self.open: dict[socket.socket, float] = {}  # connection -> when it must be shut
        self.lock = threading.Lock()
        self.refused = self.shut = 0
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)  # closed unread: every slot is taken
            return
        with self.lock:
            self.open[request] = time.monotonic() + self.connection_s
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: give its slot back
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: Any) -> None:
        with self.lock:
            if self.open.pop(request, None) is not None:
                self.slots.release()

    def service_actions(self) -> None:
        now = time.monotonic()
        with self.lock:
            late = [request for request, until in self.open.items() if until <= now]
        for request in late:
            self.shut += 1
            try:
                request.shutdown(socket.SHUT_RDWR)  # its thread's read or write ends; the thread closes it
            except OSError:
                pass


def serve_metrics(registry: Any, port: int, host: str, **bounds: Any) -> tuple[BoundedServer, threading.Thread]:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread, within the bounds above."""
    from prometheus_client.exposition import MetricsHandler

    class Handler(MetricsHandler.factory(registry)):  # type: ignore[misc]
        timeout = READ_TIMEOUT_S  # StreamRequestHandler: the socket's timeout for every read and write

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet, as prometheus_client's
            pass

    server = BoundedServer((host, port), Handler, **bounds)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="prometheus",
                              daemon=True)
    thread.start()
    return server, thread


class Exporter:
    """One ``/metrics`` endpoint with its own registry (several share a process under the threads backend).

    ``port`` 0 lets the OS choose; ``address`` is ``host:port`` as bound. ``process=True`` adds
    prometheus_client's process collector (``process_resident_memory_bytes``, CPU seconds).
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1", *, process: bool = True):
        import prometheus_client

        self._client = prometheus_client
        self.registry = prometheus_client.CollectorRegistry()
        self._gauges: dict[str, Any] = {}
        if process:
            prometheus_client.ProcessCollector(registry=self.registry)
        try:
            self._server, self._thread = serve_metrics(self.registry, port, host)
        except OSError as error:
            raise OSError(f"cannot serve Prometheus metrics on {host}:{port} ({error}); set log.prometheus_port=0 "
                          "(any free port) or -1 (no endpoint)") from None
        self.address = f"{host}:{self._server.server_port}"

    @property
    def refused(self) -> int:
        """Connections closed unread because ``MAX_CONNECTIONS`` were open."""
        return self._server.refused

    def set(self, key: str, value: float) -> None:
        """A metrics record's value as the gauge ``srljax_train_<key>`` (the keys of ``metrics.jsonl``)."""
        name = "srljax_train_" + metric_name(key)
        if name not in self._gauges:
            self._gauges[name] = self._client.Gauge(name, f"{key} in the run's metrics.jsonl", registry=self.registry)
        self._gauges[name].set(value)

    def add_collector(self, collect: Callable[[], Iterable[Any]]) -> None:
        self.registry.register(_Families(collect))  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop serving without waiting: ``shutdown`` takes up to the server's 0.5 s poll interval, which
        a stopping worker (or a process about to exit) need not spend."""
        def stop() -> None:
            self._server.shutdown()
            self._server.server_close()

        threading.Thread(target=stop, name="prometheus-close", daemon=True).start()


# -- the targets file --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    address: str  # host:port
    labels: dict[str, str] = field(default_factory=dict)  # experiment, trial, role, index


def targets_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / TARGETS_FILE


def write_targets(run_dir: str | os.PathLike[str], targets: Iterable[Target]) -> Path:
    """Write ``RUN_DIR/prometheus_targets.json`` atomically (Prometheus rereads it on change)."""
    path = targets_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [{"targets": [t.address], "labels": dict(t.labels)} for t in targets]
    tmp = path.with_name(f".{TARGETS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def read_targets(run_dir: str | os.PathLike[str]) -> list[Target]:
    """The targets file of a run; ``FileNotFoundError`` naming why it may be missing."""
    path = targets_path(run_dir)
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no {path}: the trial has not registered its workers yet, it is not a run folder, "
                                "or it runs with log.prometheus_port=-1 (no endpoints)") from None
    except ValueError as error:
        raise ValueError(f"{path} is not a Prometheus file_sd JSON file: {error}") from None
    return [Target(str(address), {str(k): str(v) for k, v in group.get("labels", {}).items()})
            for group in body for address in group.get("targets", [])]


# -- scraping ---------------------------------------------------------------------------------------
def scrape(address: str, timeout: float = SCRAPE_TIMEOUT_S) -> dict[str, Any]:
    """The metric families one endpoint serves now, by family name (``prometheus_client.parser``);
    ``OSError`` if it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as reply:  # noqa: S310 - http only
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def values(families: dict[str, Any]) -> dict[str, float]:
    """Flatten scraped families into ``{sample name{label=value,...}: value}``, labels sorted:
    ``{"srljax_env_steps_total": 512.0, 'srljax_time_seconds_total{phase="wait/env"}': 3.2}``."""
    out: dict[str, float] = {}
    for family in families.values():
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[sample.name + (f"{{{labels}}}" if labels else "")] = float(sample.value)
    return out
