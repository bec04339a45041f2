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
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGETS_FILE = "prometheus_targets.json"
SCRAPE_TIMEOUT_S = 5.0


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
            self._server, self._thread = prometheus_client.start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            raise OSError(f"cannot serve Prometheus metrics on {host}:{port} ({error}); set log.prometheus_port=0 "
                          "(any free port) or -1 (no endpoint)") from None
        self.address = f"{host}:{self._server.server_port}"

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
