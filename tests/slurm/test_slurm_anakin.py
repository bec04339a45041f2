"""An Anakin run (a JAX env: rollout and update in one compiled program) over two Slurm nodes, one
``jax.distributed`` process on each (``launch/hosts.py``), submitted with ``python -m launch.slurm`` and the same
config a single process runs.

    bash tests/slurm/cluster.sh up
    .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_anakin.py -s     # a few minutes on 2 cores

Skipped when the cluster is down, unless SLURM_TEST_REQUIRED=1. The job runs this checkout (``slurm.workdir``
defaults to the current directory, the tests' root) with this interpreter.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.slurm.test_launch_slurm import _require_cluster, in_queue, launch, result, submit, sx, wait_for  # noqa: F401

CONFIG = "configs/gymnax_cartpole_ppo.py"
EXPERIMENT = "gymnax_cartpole_ppo"
UPDATES = 120  # 4 envs x 128 steps each: 61,440 env steps
HOSTS = ["trainer.num_hosts=2", f"total_env_steps={UPDATES * 512}", "log.wandb=disabled", "log.progress=lines",
         "checkpoint.every_updates=40"]

pytestmark = pytest.mark.slurm


def test_anakin_run_over_two_nodes_learns(tmp_path: Path) -> None:
    pytest.importorskip("gymnax")
    run_dir = tmp_path / EXPERIMENT / "hosts"
    shown = launch(CONFIG, "-f", "hosts", f"log.run_root={tmp_path}", *HOSTS, "--dry-run")
    assert shown.returncode == 0 and "--nodes=2 --ntasks=2 --ntasks-per-node=1" in shown.stdout, shown.stdout + shown.stderr
    assert "launch.hosts" in shown.stdout and "launch.slurm.controller" not in shown.stdout, shown.stdout
    start = time.monotonic()
    job = submit(tmp_path, "hosts", *HOSTS, config=CONFIG)
    try:
        wait_for(lambda: not in_queue(job), 900, f"job {job} finishing", run_dir / "logs")
    finally:
        if in_queue(job):
            sx("scancel", job)
    wall = time.monotonic() - start
    log = (run_dir / "logs" / f"job-{job}.log").read_text()
    assert (result(run_dir)["exit_code"], result(run_dir)["reason"]) == (0, "done"), (result(run_dir), log[-3000:])
    assert "JobState=COMPLETED" in sx("scontrol", "show", "job", job).stdout
    nodes = dict(re.findall(r"\[hosts\] process (\d) of 2 on (\S+):", log))
    assert set(nodes) == {"0", "1"} and nodes["0"] != nodes["1"], (nodes, log[-3000:])  # one process per node
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["update"] for m in lines] == list(range(1, UPDATES + 1))  # one line per update, from process 0 only
    assert lines[-1]["env_steps"] == UPDATES * 512
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == UPDATES, steps
    first, last = lines[0]["episode_return"], [m["episode_return"] for m in lines[-10:]]
    print(f"\nanakin over two nodes {nodes}: job {job}, wall {wall:.0f} s, return {first:.1f} at update 1 -> "
          f"{sum(last) / len(last):.1f} (mean of the last 10 lines) at {lines[-1]['env_steps']:,} env steps")
    assert sum(last) / len(last) >= max(100.0, 3 * first), (first, last)  # CartPole learns: ~20 at random


def test_anakin_run_over_two_nodes_stops_and_resumes(tmp_path: Path) -> None:
    """``launch.slurm stop``: the batch script turns it into SIGTERM for both processes, which stop at the same call
    with their checkpoint (``stopped``, exit 0 as the controller ends a requested stop); ``--resume`` submits it
    again and the trial finishes with one line per update, none missing, none repeated."""
    pytest.importorskip("gymnax")
    run_dir = tmp_path / EXPERIMENT / "stop"
    metrics = run_dir / "metrics.jsonl"

    def updates() -> list[int]:
        return [json.loads(x)["update"] for x in metrics.read_text().splitlines()] if metrics.exists() else []

    job = submit(tmp_path, "stop", *HOSTS, "checkpoint.every_updates=5", config=CONFIG)
    try:
        wait_for(lambda: len(updates()) >= 3, 600, "the first lines", run_dir / "logs")
        r = launch("stop", "-e", EXPERIMENT, "-f", "stop", "--run-root", str(tmp_path), timeout=400)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        if in_queue(job):
            sx("scancel", job)
    log = (run_dir / "logs" / f"job-{job}.log").read_text()
    assert (result(run_dir)["exit_code"], result(run_dir)["reason"]) == (0, "stopped"), (result(run_dir), log[-3000:])
    stopped = updates()
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert 0 < len(stopped) < UPDATES and steps[-1] == stopped[-1], (stopped, steps, log[-3000:])

    r = launch(CONFIG, "-f", "stop", f"log.run_root={tmp_path}", "--resume")
    assert r.returncode == 0, r.stdout + r.stderr
    job = re.search(r"submitted job (\d+)", r.stdout).group(1)
    try:
        wait_for(lambda: not in_queue(job), 900, f"job {job} finishing", run_dir / "logs")
    finally:
        if in_queue(job):
            sx("scancel", job)
    log = (run_dir / "logs" / f"job-{job}.log").read_text()
    assert (result(run_dir)["exit_code"], result(run_dir)["reason"]) == (0, "done"), (result(run_dir), log[-3000:])
    assert f"resumed from the checkpoint of update {steps[-1]}" in log, log[-3000:]
    assert updates() == list(range(1, UPDATES + 1))
