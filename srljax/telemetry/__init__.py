"""Telemetry: what a running experiment says about itself.

``metrics.py`` (``metrics.jsonl``, progress lines, wandb; ``MetricsLogger``), ``stats.py`` (per-worker counters,
waits per channel, gauges), ``progress.py`` (what a distributed trial's launcher prints while it runs and at the
end), ``prometheus.py`` and ``exporter.py`` (every worker's Prometheus endpoint and the trial's targets file).
"""
