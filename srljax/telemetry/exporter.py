"""Every worker's (and the controller's) Prometheus endpoint, and the trial's targets file.

    exporter = serve_worker(worker)         # Worker.run does this; None with log.prometheus_port=-1
    exporter.address                         # "127.0.0.1:41233", sent to the controller in ``register``
    serve_controller(controller)             # the controller's own endpoint
    write_trial_targets(controller)          # RUN_DIR/prometheus_targets.json: every registered worker

A worker serves what it already counts (``WorkerStats``) plus its ``metrics()``, as whole-run values, so
PromQL's ``rate()`` (or ``launch.status``, from two scrapes) makes rates and shares of wall time:
``srljax_<counter>_total``, ``srljax_time_seconds_total{phase}``, gauges, sample windows
(``{stat="p50"|"p99"|"mean"}``), histograms (``lag_received``, ``srljax_<name>_hist``),
``srljax_socket_events_total{socket, event}``, ``srljax_worker_up{state}`` and the process's memory and CPU.
The endpoint serves the copy the main loop last wrote (only the main thread touches sockets).
``docs/architecture.md``, "Monitoring".
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

from srljax.comm.hosts import bind_host
from srljax.layout import CONTROLLER
from srljax.telemetry.prometheus import Exporter, Target, metric_name, write_targets

METRICS_STREAM = "prometheus"  # the name-service key suffix: <exp>/<trial>/<role>/<i>/prometheus


def serve(cfg: Any) -> Exporter | None:
    """An endpoint on this node's address (loopback for local runs) at ``log.prometheus_port``
    (0: any free port); None when it is -1."""
    port = cfg.log.prometheus_port
    return None if port < 0 else Exporter(port, bind_host())


def serve_worker(worker: Any) -> Exporter | None:
    exporter = serve(worker.cfg)
    if exporter is not None:
        exporter.add_collector(lambda: worker_families(worker))
    return exporter


def serve_controller(controller: Any) -> Exporter | None:
    exporter = serve(controller.cfg)
    if exporter is not None:
        exporter.add_collector(lambda: controller_families(controller))
    return exporter


def worker_families(worker: Any) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    totals = worker.stats.totals()
    for name, value in sorted(totals["counters"].items()):
        yield CounterMetricFamily(f"srljax_{metric_name(name)}", f"{name}, whole run", value=float(value))
    phases = CounterMetricFamily("srljax_time_seconds", "seconds spent in each phase of the worker's loop",
                                 labels=["phase"])
    for name, seconds in sorted(totals["seconds"].items()):
        phases.add_metric([name], seconds)
    yield phases
    yield from _samples(totals["percentiles"])
    yield from _histograms(totals["histograms"])
    yield from _observed(totals.get("observed", {}))
    gauges = dict(totals["gauges"])
    sockets = CounterMetricFamily("srljax_socket_events", "counters of the worker's sockets", labels=["socket", "event"])
    for key, value in getattr(worker, "_exported", {}).items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            continue
        prefix, _, event = key.partition("/")
        if event and prefix not in ("queue", "batch", "carries", "lag", "time", "throughput"):
            sockets.add_metric([prefix, event], float(value))
        else:
            gauges[key] = value
    yield sockets
    for name, value in sorted(gauges.items()):
        yield GaugeMetricFamily(f"srljax_{metric_name(name)}", name, value=float(value))
    state = GaugeMetricFamily("srljax_worker_up", "1 for the worker's state", labels=["state"])
    state.add_metric([worker.state], 1.0)
    yield state
    yield from _host_families()


def _host_families() -> Iterator[Any]:
    """Which process this is and the cores it may use, so ``launch.status`` can add up CPU per host (a process
    counted once however many workers it serves) against what the host gives the trial."""
    from prometheus_client.core import GaugeMetricFamily

    yield GaugeMetricFamily("srljax_process_id", "this worker's OS process id", value=float(os.getpid()))
    try:
        cores = len(os.sched_getaffinity(0))  # what Slurm or taskset allows, not just what the machine has
    except AttributeError:
        cores = os.cpu_count() or 1
    yield GaugeMetricFamily("srljax_host_cpus", "cores this process may run on", value=float(cores))


def _samples(percentiles: dict[str, dict[str, float]]) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    for name, stats in sorted(percentiles.items()):
        family = GaugeMetricFamily(f"srljax_{metric_name(name)}", f"{name} over the recent window", labels=["stat"])
        for key, value in stats.items():
            family.add_metric([key.rsplit("/", 1)[-1]], value)
        yield family


def _histograms(histograms: dict[str, dict[int, int]]) -> Iterator[Any]:
    from prometheus_client.core import HistogramMetricFamily

    for name, counts in sorted(histograms.items()):
        buckets, total = [], 0
        for value in sorted(counts):
            total += counts[value]
            buckets.append((str(value), float(total)))
        buckets.append(("+Inf", float(total)))
        yield HistogramMetricFamily(f"srljax_{metric_name(name)}", f"{name}, whole run", buckets=buckets,
                                    sum_value=float(sum(k * n for k, n in counts.items())))


def _observed(observed: dict[str, tuple[tuple[float, ...], list[int], float]]) -> Iterator[Any]:
    """``WorkerStats.observe`` histograms (latencies) as Prometheus histograms: ``srljax_<name>_hist_bucket{le}``."""
    from prometheus_client.core import HistogramMetricFamily

    for name, (bounds, counts, total) in sorted(observed.items()):
        cumulative, buckets = 0, []
        for bound, count in zip([*map(str, bounds), "+Inf"], counts):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        yield HistogramMetricFamily(f"srljax_{metric_name(name)}_hist", f"{name}, whole run", buckets=buckets,
                                    sum_value=float(total))


def controller_families(controller: Any) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    for _ in range(3):  # the controller's thread changes these dicts; a copy torn by a resize is taken again
        try:
            states = list(controller.states.values())
            by_worker = dict(controller.restarts.counts)
            registered = len(controller.info)
            break
        except RuntimeError:
            continue
    else:
        return
    workers = GaugeMetricFamily("srljax_workers", "workers of the trial by state", labels=["state"])
    for state in sorted(set(states)):
        workers.add_metric([state], float(states.count(state)))
    yield workers
    yield GaugeMetricFamily("srljax_workers_expected", "workers in the layout", value=float(len(controller.expected)))
    yield GaugeMetricFamily("srljax_workers_registered", "workers registered now", value=float(registered))
    restarts = CounterMetricFamily("srljax_worker_restarts", "restarts of each worker", labels=["worker"])
    for name, count in sorted(by_worker.items()):
        restarts.add_metric([name], float(count))
    yield restarts


def write_trial_targets(controller: Any) -> None:
    """``RUN_DIR/prometheus_targets.json``: the controller and every registered worker that serves metrics."""
    cfg = controller.cfg
    if cfg.log.prometheus_port < 0:
        return
    base = {"experiment": cfg.name, "trial": cfg.trial}
    targets = []
    if controller.exporter is not None:
        targets.append(Target(controller.exporter.address, {**base, "role": CONTROLLER, "index": "0"}))
    for key, name in controller.expected.items():
        address = controller.info.get(key, {}).get("metrics")
        if isinstance(address, str) and address:
            role, index = name.split("/")
            targets.append(Target(address, {**base, "role": role, "index": index}))
    try:
        write_targets(cfg.run_dir, targets)
    except OSError as error:  # monitoring must not end a trial
        controller.say(f"cannot write the Prometheus targets file: {error}")
