"""Prometheus on every worker: the trial's file_sd targets file lists them all, and each answers in the text format."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from launch.threads import run_threads
from srljax.config import apply_overrides, problems
from srljax.layout import build_layout
from srljax.system.shell.controller import Controller
from srljax.telemetry.metrics import MetricsLogger
from srljax.telemetry.prometheus import read_targets, scrape, targets_path
from tests.test_system_threads import small_config

# what each role must serve (family names as prometheus_client's parser reports them: counters without _total)
COMMON = {"srljax_time_seconds", "srljax_worker_up", "srljax_socket_events", "process_resident_memory_bytes"}
BY_ROLE = {
    "actor": COMMON | {"srljax_env_steps", "srljax_segments", "srljax_latency_inference_ms", "srljax_policy_version",
                       "srljax_queue_requests_in_flight", "srljax_queue_segments_waiting"},
    "policy": COMMON | {"srljax_rows", "srljax_requests", "srljax_batch_fill", "srljax_queue_pending_rows",
                        "srljax_policy_version"},
    "buffer": COMMON | {"srljax_samples", "srljax_segments", "srljax_queue_held_columns"},
    "trainer": COMMON | {"srljax_samples", "srljax_updates", "srljax_lag_received", "srljax_time_update_s",
                         "srljax_queue_pending_columns", "srljax_policy_version", "srljax_train_sps",
                         "srljax_train_worker_restarts"},
    "controller": {"srljax_workers", "srljax_workers_registered", "srljax_worker_restarts",
                   "process_resident_memory_bytes"},
}
PROGRESS = {"actor": "srljax_env_steps", "policy": "srljax_rows", "buffer": "srljax_segments", "trainer": "srljax_updates"}


def _value(families, name, **labels) -> float:
    family = families[name]
    return sum(s.value for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())
               and not s.name.endswith(("_created", "_bucket", "_count", "_sum")))


def _ready(scraped, expected) -> bool:
    """Every endpoint answered with its role's families, and every worker has done some work."""
    if set(scraped) != expected:
        return False
    for (role, _), families in scraped.items():
        if not BY_ROLE[role] <= set(families) or (role in PROGRESS and _value(families, PROGRESS[role]) <= 0):
            return False
    return True


def test_every_worker_of_a_distributed_run_is_listed_and_serves_its_metrics(tmp_path, monkeypatch):
    cfg = small_config(tmp_path, "layout.num_buffer_workers=1", "total_env_steps=10000000", "timeout_seconds=300")
    expected = {("controller", "0")} | {(role, str(i)) for role, i in build_layout(cfg).workers()}
    done = threading.Event()  # set by the scraping thread: the controller then ends the trial as done
    original_tick = Controller._tick

    def tick(self, timeout_ms):
        original_tick(self, timeout_ms)
        if done.is_set() and self._started:
            self.done = {"ended_by": "the test"}

    monkeypatch.setattr(Controller, "_tick", tick)
    seen: dict = {}

    def scrape_all():
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and not _ready(seen.get("scraped", {}), expected):
                time.sleep(0.5)
                if not targets_path(cfg.run_dir).exists():
                    continue
                seen["targets"] = read_targets(cfg.run_dir)
                scraped = {}
                for target in seen["targets"]:
                    try:
                        scraped[target.labels["role"], target.labels["index"]] = scrape(target.address)
                    except OSError:
                        pass
                seen["scraped"] = scraped
        finally:
            done.set()

    scraper = threading.Thread(target=scrape_all, daemon=True)
    scraper.start()
    result = run_threads(cfg)
    scraper.join(timeout=10)
    assert result.exit_code == 0 and result.reason == "done", result.message

    targets = seen["targets"]
    assert {(t.labels["role"], t.labels["index"]) for t in targets} == expected
    assert all(t.labels["experiment"] == cfg.name and t.labels["trial"] == cfg.trial for t in targets)
    assert all(t.address.startswith("127.0.0.1:") for t in targets)  # local runs stay on loopback
    assert len({t.address for t in targets}) == len(targets)
    body = json.loads(targets_path(cfg.run_dir).read_text())  # the file_sd shape Prometheus reads
    assert all(set(group) == {"targets", "labels"} and len(group["targets"]) == 1 for group in body)

    scraped = seen["scraped"]
    assert set(scraped) == expected, "every listed endpoint answers"
    for (role, index), families in scraped.items():
        assert BY_ROLE[role] <= set(families), (role, sorted(BY_ROLE[role] - set(families)))
        assert _value(families, "process_resident_memory_bytes") > 0
    actor, policy, trainer = scraped["actor", "0"], scraped["policy", "0"], scraped["trainer", "0"]
    assert _value(actor, "srljax_time_seconds", phase="wait/env") > 0
    assert _value(actor, "srljax_latency_inference_ms", stat="p99") >= _value(actor, "srljax_latency_inference_ms",
                                                                             stat="p50") > 0
    hist = actor["srljax_latency_inference_ms_hist"]  # the round trips as a histogram, too
    buckets = [(s.labels["le"], s.value) for s in hist.samples if s.name.endswith("_bucket")]
    assert buckets[-1][0] == "+Inf" and [v for _, v in buckets] == sorted(v for _, v in buckets), buckets
    assert buckets[-1][1] == next(s.value for s in hist.samples if s.name.endswith("_count")) > 0
    assert _value(actor, "srljax_host_cpus") >= 1 and _value(actor, "srljax_process_id") > 0
    assert 0 < _value(policy, "srljax_batch_fill", stat="mean") <= 1
    assert _value(policy, "srljax_time_seconds", phase="compute/act") > 0
    assert _value(trainer, "srljax_time_seconds", phase="compute/update") > 0
    lag = trainer["srljax_lag_received"]
    count = next(s.value for s in lag.samples if s.name.endswith("_count"))
    assert count == _value(trainer, "srljax_samples") > 0  # one lag per segment taken
    assert _value(scraped["controller", "0"], "srljax_workers", state="running") == len(expected) - 1


def test_the_single_process_loop_lists_its_endpoint_and_minus_one_turns_it_off(tmp_path):
    base = small_config(tmp_path, "layout.mode=single", "layout.num_actors=1", "layout.inference=inline",
                        "trainer.batch_envs=0")
    logger = MetricsLogger(base, total=100)
    try:
        (target,) = read_targets(base.run_dir)
        assert target.labels == {"experiment": base.name, "trial": base.trial, "role": "trainer", "index": "0"}
        logger.write({"env_steps": 64, "episode_return": 12.5, "sps": 100.0})
        families = scrape(target.address)
        assert _value(families, "srljax_train_episode_return") == 12.5
        # a loop writing many lines at once (the Anakin loop) sets the gauges from its last line only
        logger.write({"env_steps": 128, "episode_return": 20.0, "sps": 100.0}, gauges=False)
        assert _value(scrape(target.address), "srljax_train_episode_return") == 12.5
        logger.write({"env_steps": 192, "episode_return": 30.0, "sps": 100.0})
        assert _value(scrape(target.address), "srljax_train_episode_return") == 30.0
    finally:
        logger.close()
    off = apply_overrides(base, ["trial=off", "log.prometheus_port=-1"])
    MetricsLogger(off, total=100).close()
    assert not targets_path(off.run_dir).exists()


@pytest.mark.parametrize("port,mode,ok", [(0, "distributed", True), (-1, "distributed", True), (9100, "single", True),
                                          (9100, "distributed", False), (-2, "single", False), (70000, "single", False)])
def test_prometheus_port_values(tmp_path, port, mode, ok):
    cfg = small_config(tmp_path, f"log.prometheus_port={port}")
    if mode == "single":
        cfg = apply_overrides(cfg, ["layout.mode=single", "layout.num_actors=1", "layout.inference=inline"])
    found = [p for p in problems(cfg) if "prometheus_port" in p]
    assert not found if ok else found, found


def test_targets_file_missing_says_why(tmp_path):
    with pytest.raises(FileNotFoundError, match="prometheus_port=-1"):
        read_targets(Path(tmp_path))


def test_the_targets_file_follows_registrations(tmp_path):
    """The controller lists itself and every registered worker; a newcomer's register replaces the old port."""
    from types import SimpleNamespace

    from srljax.telemetry.exporter import write_trial_targets

    cfg = small_config(tmp_path)
    controller = SimpleNamespace(cfg=cfg, exporter=SimpleNamespace(address="127.0.0.1:9000"), say=print,
                                 expected={"k0": "trainer/0", "k1": "actor/0", "k2": "actor/1"},
                                 info={"k0": {"metrics": "127.0.0.1:9001"}, "k1": {"metrics": "127.0.0.1:9002"},
                                       "k2": {"pid": 1}})  # actor/1: registered without an endpoint
    write_trial_targets(controller)
    assert {(t.labels["role"], t.labels["index"], t.address) for t in read_targets(cfg.run_dir)} == {
        ("controller", "0", "127.0.0.1:9000"), ("trainer", "0", "127.0.0.1:9001"), ("actor", "0", "127.0.0.1:9002")}
    controller.info["k1"] = {"metrics": "127.0.0.1:9555"}  # actor/0 came back at a new port
    write_trial_targets(controller)
    assert ("actor", "0", "127.0.0.1:9555") in {(t.labels["role"], t.labels["index"], t.address)
                                                for t in read_targets(cfg.run_dir)}
