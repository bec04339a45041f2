"""``layout.names=controller`` on the throw-away Slurm cluster (tests/slurm/cluster.sh): the names a trial's
workers add and look up (metrics addresses, every served stream) ride their control connections to the
controller, on other nodes than the controller's; the shared run folder keeps none of them.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_served_names.py -s
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.slurm.test_launch_slurm import (  # noqa: F401 - _require_cluster: the same skip (or fail) as there
    EXPERIMENT,
    _require_cluster,
    in_queue,
    result,
    submit,
    sx,
    wait_for,
)

pytestmark = pytest.mark.slurm

SMALL = ["log.wandb=disabled", "log.progress=lines", "algo.num_steps=32", "trainer.num_minibatches=2",
         "trainer.update_epochs=1", f"total_env_steps={2 * 4 * 32 * 8}", "layout.names=controller"]


def test_a_trial_with_names_served_by_the_controller_completes_on_slurm(tmp_path: Path) -> None:
    run_dir = tmp_path / EXPERIMENT / "served"
    start = time.monotonic()
    job = submit(tmp_path, "served", *SMALL)
    try:
        wait_for(lambda: not in_queue(job), 600, f"job {job} finishing", run_dir / "logs")
    finally:
        if in_queue(job):
            sx("scancel", job)
    done = result(run_dir)
    assert (done["reason"], done["exit_code"]) == ("done", 0), done
    names = run_dir / "names"
    # with layout.names=folder every worker leaves its metrics and stream addresses here; served, only the
    # controller's own address (what a worker reads once to connect) may be there
    left = sorted(p.name for p in names.rglob("*") if p.is_file()) if names.exists() else []
    assert len(left) <= 1, left
    assert (run_dir / "metrics.jsonl").stat().st_size > 0
    print(f"\nserved names on slurm: job {job}, wall {time.monotonic() - start:.0f} s, names folder {left}")
