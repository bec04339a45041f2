"""Issue 41's multi-agent work as worker graphs on the throw-away Slurm cluster (tests/slurm/cluster.sh).

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_marl.py -s

SMAX 3m MAPPO (``configs/smax_3m_mappo.py layout.mode=distributed``): two actors stepping JaxMARL's SMAX on the host
(``envs/jax_envs/host.py``) and a trainer, one het job. The job must end ``done`` with exit 0, both actors and the
trainer must have run as Slurm tasks, and the trainer's lines must carry the SMAX outcomes the actors sent
(``win_rate``) beside the team return. Slow: each task compiles SMAX's step (minutes on a crowded 2-core box; the
compile cache makes a second run faster).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.slurm.test_launch_slurm import _require_cluster  # noqa: F401 - the same skip (or fail) as there
from tests.slurm.test_slurm_roles import QUIET, jsonl, run_job

pytestmark = pytest.mark.slurm

pytest.importorskip("jaxmarl")

# the threads test's sizes (tests/test_jaxmarl.py), so the compile cache it filled serves these tasks too
SMAX_GRAPH = ["layout.mode=distributed", "layout.num_actors=2", "layout.inference=inline", "env.num_envs=8",
              "algo.num_steps=32", "trainer.batch_envs=16", "trainer.num_minibatches=2", "trainer.update_epochs=2",
              "log.window=50", "layout.stall_seconds=1200"]


def test_smax_mappo_as_a_worker_graph(tmp_path: Path) -> None:
    steps = 16 * 32 * 6  # 6 updates
    run_dir, nodes, _ = run_job(tmp_path, "configs/smax_3m_mappo.py", "smax_3m_mappo", "graph", *QUIET, *SMAX_GRAPH,
                                f"total_env_steps={steps}", timeout=1800)
    assert {"trainer/0", "actor/0", "actor/1"} <= set(nodes), nodes
    lines = jsonl(run_dir / "metrics.jsonl")
    assert lines[-1]["update"] == 6 and lines[-1]["env_steps"] >= steps, lines[-1]
    won = [x for x in lines if "win_rate" in x]
    assert won and all(0.0 <= x["win_rate"] <= 1.0 for x in won), lines[-1]
    assert all(math.isfinite(x["value_loss"]) for x in lines) and 1.0 < lines[-1]["legal_actions"] < 8.0, lines[-1]
