"""Worker restart on the throw-away Slurm cluster (tests/slurm/cluster.sh): lost tasks come back as steps.

    bash tests/slurm/cluster.sh up
    .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_restart.py -s
    bash tests/slurm/cluster.sh down

The CartPole graph as a het job (trainer and policy worker on one node, two actors in one step on
another). policy/0 is SIGKILLed: its single-task step ends, which the controller sees through the
step's exit file. actor/1 is SIGSTOPped: its step (shared with actor/0) goes on, the controller
sees only its silence, kills it where it runs (``srun --overlap --nodelist kill``) and starts it as
a step of its own. Both come back and the trial finishes ``done``.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import psutil
import pytest

from tests.slurm.test_launch_slurm import (  # noqa: F401 - _require_cluster: the same skip (or fail) as there
    EXPERIMENT,
    SMALL,
    _require_cluster,
    in_queue,
    result,
    submit,
    sx,
    wait_for,
)

pytestmark = pytest.mark.slurm


def worker_pids(job_log: Path) -> dict[str, int]:
    text = job_log.read_text() if job_log.exists() else ""
    found = re.search(r"all \d+ workers registered: (.*)", text)
    return {name: int(pid) for name, pid in re.findall(r"(\w+/\d+) \(pid (\d+)\)", found.group(1))} if found else {}


def test_lost_tasks_come_back_as_steps_of_their_own(tmp_path: Path) -> None:
    run_dir = tmp_path / EXPERIMENT / "restart"
    overrides = [o for o in SMALL if not o.startswith("total_env_steps")]
    # long enough (~100 s at CI's ~4,000 env steps/s) that both losses are seen and repaired before the
    # end: at 20,480 steps the run finished 2 s after the actor was stopped, before its 5 s heartbeat timeout
    job = submit(tmp_path, "restart", *overrides, f"total_env_steps={2 * 4 * 32 * 1600}",
                 "layout.restart_backoff_seconds=0.5", "layout.heartbeat_timeout_seconds=5")
    job_log = run_dir / "logs" / f"job-{job}.log"
    stopped = 0
    try:
        metrics = run_dir / "metrics.jsonl"
        wait_for(lambda: metrics.exists() and metrics.stat().st_size > 0, 400, "a first metrics line", run_dir / "logs")
        pids = worker_pids(job_log)
        assert {"policy/0", "actor/1"} <= set(pids), job_log.read_text()
        os.kill(pids["policy/0"], signal.SIGKILL)
        wait_for(lambda: "worker policy/0 (pid" in job_log.read_text() and " is back after" in job_log.read_text(),
                 300, "policy/0 back", run_dir / "logs")
        stopped = pids["actor/1"]
        os.kill(stopped, signal.SIGSTOP)
        wait_for(lambda: re.search(r"worker actor/1 \(pid \d+\) is back after", job_log.read_text()) is not None,
                 300, "actor/1 back", run_dir / "logs")
        assert not psutil.pid_exists(stopped) or psutil.Process(stopped).status() == psutil.STATUS_ZOMBIE
        wait_for(lambda: not in_queue(job), 900, f"job {job} finishing", run_dir / "logs")
    finally:
        if stopped:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(stopped, sig)
                except ProcessLookupError:
                    pass
        if in_queue(job):
            sx("scancel", job)
    log = job_log.read_text()
    print(f"\n{log[-4000:]}")
    assert (result(run_dir)["exit_code"], result(run_dir)["reason"]) == (0, "done"), result(run_dir)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["restarts"]["by_worker"] == {"actor/1": 1, "policy/0": 1}, status["restarts"]
    reasons = {e["worker"]: e["reason"] for e in status["restarts"]["events"]}
    assert reasons["policy/0"].startswith("its process exited with code"), reasons  # its step's exit file
    assert reasons["actor/1"].startswith("no heartbeat for"), reasons
    assert re.search(r"restarting actor/1: srun --het-group=1 --overlap --nodes=1 --ntasks=1 .*--nodelist=n\d", log), log
    assert "2 worker restarts (actor/1 x1, policy/0 x1)" in result(run_dir)["message"]
    assert "JobState=COMPLETED" in sx("scontrol", "show", "job", job).stdout
