"""Per-worker metrics: counters, time spent waiting on each channel, gauges and value samples.

    stats = WorkerStats()
    with stats.time("wait/env"):              # accumulated seconds, reported as a share of wall time
        ts = env.recv()
    stats.add("env_steps", len(ts.env_id))    # reported as a total and as throughput/env_steps_per_s
    stats.gauge("queue/pending_requests", 3)
    stats.sample("latency/inference_ms", 1.7) # reported as p50 / p99 / mean of the window
    record = stats.snapshot()                 # rates since the previous snapshot

Thread-safe: a worker's control thread reads ``snapshot(peek=True)`` for heartbeats while the
main thread updates.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

import numpy as np

LATENCY_BUCKETS_MS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
"""Upper bounds of the whole-run latency histograms (``observe``; Prometheus ``le`` buckets, +Inf added)."""

RATE_COUNTERS = ("env_steps", "requests", "rows", "segments", "updates", "samples")
"""Counters that also get a ``throughput/<name>_per_s`` rate."""


class WorkerStats:
    def __init__(self, window: int = 10_000):
        self._lock = threading.Lock()
        self.counters: Counter[str] = Counter()
        self.gauges: dict[str, float] = {}
        self._timers: Counter[str] = Counter()
        self._samples: dict[str, deque[float]] = {}
        self._histograms: dict[str, Counter[int]] = {}
        self._observed: dict[str, tuple[np.ndarray, list[float]]] = {}  # name -> (counts per bucket, [sum])
        self._open: dict[str, float] = {}  # begin(name) -> its start, until end(name)
        self._window = window
        self._last_time = time.monotonic()
        self._last_counters: Counter[str] = Counter()
        self._last_timers: Counter[str] = Counter()

    def add(self, name: str, n: float = 1) -> None:
        with self._lock:
            self.counters[name] += n

    def gauge(self, name: str, value: float) -> None:
        with self._lock:
            self.gauges[name] = float(value)

    def sample(self, name: str, value: float) -> None:
        with self._lock:
            self._samples.setdefault(name, deque(maxlen=self._window)).append(float(value))

    def count_value(self, name: str, value: int) -> None:
        """One more occurrence of the integer ``value`` (a whole-run histogram, e.g. policy lag)."""
        with self._lock:
            self._histograms.setdefault(name, Counter())[int(value)] += 1

    def observe(self, name: str, value: float) -> None:
        """One more ``value`` in the whole-run histogram ``name`` (``LATENCY_BUCKETS_MS``; exported to Prometheus
        as a histogram, so quantiles can be taken over any window and summed over workers)."""
        with self._lock:
            counts, total = self._observed.setdefault(name, (np.zeros(len(LATENCY_BUCKETS_MS) + 1, np.int64), [0.0]))
            counts[int(np.searchsorted(LATENCY_BUCKETS_MS, value))] += 1  # value <= bound i: bucket i
            total[0] += float(value)

    def begin(self, name: str) -> None:
        """Start a span that ``end`` closes (e.g. an update that ends in another poll); until then
        ``totals`` counts it as running."""
        with self._lock:
            self._open[name] = time.perf_counter()

    def end(self, name: str) -> None:
        with self._lock:
            start = self._open.pop(name, None)
            if start is not None:
                self._timers[name] += time.perf_counter() - start

    def totals(self) -> dict[str, Any]:
        """Whole-run values for a Prometheus scrape: ``counters``, ``seconds`` per timer (open spans
        included), ``gauges``, ``histograms``, ``observed`` (bounds, counts per bucket with +Inf last, sum) and
        ``percentiles`` (of the sample windows)."""
        now = time.perf_counter()
        with self._lock:
            seconds = Counter(self._timers)
            for name, start in self._open.items():
                seconds[name] += now - start
            out = {"counters": dict(self.counters), "seconds": dict(seconds), "gauges": dict(self.gauges),
                   "histograms": {k: dict(v) for k, v in self._histograms.items()},
                   "observed": {k: (LATENCY_BUCKETS_MS, counts.tolist(), total[0])
                                for k, (counts, total) in self._observed.items()}}
            names = list(self._samples)
        out["percentiles"] = {name: self.percentiles(name) for name in names}
        return out

    @contextlib.contextmanager
    def time(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            with self._lock:
                self._timers[name] += elapsed

    def percentiles(self, name: str) -> dict[str, float]:
        with self._lock:
            values = np.array(self._samples.get(name, ()), np.float64)
        if not values.size:
            return {}
        p50, p99 = np.percentile(values, [50, 99])
        return {f"{name}/p50": float(p50), f"{name}/p99": float(p99), f"{name}/mean": float(values.mean())}

    def snapshot(self, peek: bool = False) -> dict[str, Any]:
        """Totals, rates and time shares since the last snapshot (``peek``: do not start a new interval)."""
        now = time.monotonic()
        with self._lock:
            dt = max(now - self._last_time, 1e-9)
            out: dict[str, Any] = dict(self.counters)
            for name in RATE_COUNTERS:
                if name in self.counters:
                    out[f"throughput/{name}_per_s"] = (self.counters[name] - self._last_counters[name]) / dt
            for name, total in self._timers.items():
                out[f"time/{name}"] = (total - self._last_timers[name]) / dt  # share of wall time
            out.update(self.gauges)
            for name, hist in self._histograms.items():
                out[name] = {str(k): v for k, v in sorted(hist.items())}
            names = list(self._samples)
            if not peek:
                self._last_time, self._last_counters, self._last_timers = now, Counter(self.counters), Counter(self._timers)
        for name in names:
            out.update(self.percentiles(name))
        return out
