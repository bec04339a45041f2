"""A distributed PBT population on the throw-away Slurm cluster (tests/slurm/cluster.sh): the same graph as locally.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_pbt.py -s

Two members (lr 1e-6 and 1e-3, greedy evaluation) with few, small updates, as one het job: the members'
trainers and the population manager in one component (``slurm.eval.component=trainer`` in
``configs/cartpole_pbt_distributed.py``), the actors in another. The job ends ``done``, exit 0, and the
lineage shows a copy, carried out by the copier's trainer (its log line names the source's checkpoint).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.slurm.test_launch_slurm import (  # noqa: F401 - _require_cluster: the same skip (or fail) as there
    _require_cluster,
    in_queue,
    result,
    submit,
    sx,
    wait_for,
)

pytestmark = pytest.mark.slurm

CONFIG = "configs/cartpole_pbt_distributed.py"
TINY = ["log.wandb=disabled", "log.progress=lines", "pbt.population=2", "pbt.member_lr=(1e-6,1e-3)",
        "pbt.quantile=0.5", "layout.num_actors=2", "env.num_envs=4", "algo.num_steps=16", "total_env_steps=1024",
        "pbt.ready_updates=4", "eval.episodes=2", "eval.num_envs=2", "eval.deterministic=true",
        "trainer.num_minibatches=2", "trainer.update_epochs=1"]


def test_a_small_population_runs_as_one_slurm_job_and_copies(tmp_path: Path) -> None:
    run_dir = tmp_path / "cartpole_pbt_distributed" / "pbt"
    start = time.monotonic()
    job = submit(tmp_path, "pbt", *TINY, config=CONFIG)
    try:
        wait_for(lambda: not in_queue(job), 900, f"job {job} finishing", run_dir / "logs")
    finally:
        if in_queue(job):
            sx("scancel", job)
    done = result(run_dir)
    assert (done["reason"], done["exit_code"]) == ("done", 0), done
    lineage = [json.loads(x) for x in (run_dir / "pbt" / "lineage.jsonl").read_text().splitlines()]
    copies = [x for x in lineage if "copied" in x]
    print(f"\npbt on slurm: job {job}, wall {time.monotonic() - start:.0f} s, {len(copies)} copies: {copies}")
    assert copies, lineage
    copier, source = copies[0]["member"], copies[0]["copied"]
    log = (run_dir / "logs" / f"trainer-{copier}.log").read_text()
    assert re.search(rf"ready point {copies[0]['ready']}: copied member {source}'s checkpoint step \d+", log), log[-2000:]
    members = json.loads((run_dir / "pbt" / "members.json").read_text())
    assert sorted(m["member"] for m in members) == [0, 1] and sum(bool(m.get("best")) for m in members) == 1
    assert (run_dir / "pbt" / "lineage.png").exists()
    nodes = {}
    for path in (run_dir / "logs").glob("*-*.log"):
        found = re.search(r"\[slurm_task\] (\S+) on node (\S+)", path.read_text())
        if found:
            nodes[found.group(1)] = found.group(2)
    assert nodes["trainer/0"] == nodes["trainer/1"] == nodes["population/0"] != nodes["actor/0"], nodes
