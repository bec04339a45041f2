"""PSRO as a worker graph on the throw-away Slurm cluster (tests/slurm/cluster.sh): the same graph as locally.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_psro.py -s

Kuhn poker (``configs/kuhn_psro.py layout.mode=distributed``): the population manager, one trainer and two actors as
one het job, three best responses of 4 updates each (about a minute of training; the job's start-up dominates). The
job must end ``done`` with exit 0, every role must have run as a Slurm task, and ``psro/psro.jsonl`` must hold the
manager's four lines (the untrained network's near-uniform exploitability first, each payoff matrix square and
antisymmetric), the trainer's log the two fresh starts it made on the manager's word.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.slurm.test_launch_slurm import _require_cluster  # noqa: F401 - the same skip (or fail) as there
from tests.slurm.test_slurm_roles import QUIET, jsonl, run_job

pytestmark = pytest.mark.slurm

GRAPH = ["layout.mode=distributed", "layout.num_actors=2", "psro.iterations=3", "total_env_steps=6144",
         "layout.stall_seconds=600"]


def test_psro_as_a_worker_graph(tmp_path: Path) -> None:
    run_dir, nodes, wall = run_job(tmp_path, "configs/kuhn_psro.py", "kuhn_psro", "graph", *QUIET, *GRAPH,
                                   timeout=600)
    assert {"trainer/0", "actor/0", "actor/1", "population/0"} <= set(nodes), nodes
    lines = jsonl(run_dir / "psro" / "psro.jsonl")
    assert [x["iteration"] for x in lines] == [0, 1, 2, 3] and [x["policies"] for x in lines] == [1, 2, 3, 4]
    assert lines[0]["exploitability"] == pytest.approx(0.458, abs=0.01)
    for x in lines:
        payoff = np.array(x["payoff"])
        assert payoff.shape == (x["policies"],) * 2
        np.testing.assert_allclose(payoff, -payoff.T, atol=1e-5)
    log = (run_dir / "logs" / "trainer-0.log").read_text()
    assert "best response 1: a fresh network" in log and "best response 2: a fresh network" in log, log[-2000:]
    print(f"psro on slurm: wall {wall:.0f} s, exploitability {[round(x['exploitability'], 3) for x in lines]}")
