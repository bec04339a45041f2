"""PSRO as a worker graph on the throw-away Slurm cluster (tests/slurm/cluster.sh): the same graph as locally.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_psro.py -s

One test per game, each the population manager, one trainer and two actors as one het job:

* Kuhn poker (``configs/kuhn_psro.py layout.mode=distributed``): three best responses of 4 updates each;
* Leduc poker (``configs/leduc_psro_distributed.py`` as shipped but for its size): two best responses of 2 updates
  of 8 envs per actor (the manager's exact tree of 9,457 histories, Leduc's payoffs and exploitability).

Each is about a minute, the job's start-up most of it. The job must end ``done`` with exit 0, every role must have
run as a Slurm task, and ``psro/psro.jsonl`` must hold a line per best response after the untrained network's
(whose exploitability is near uniform play's), each payoff matrix square and antisymmetric, the manager's worker
metrics its last exploitability, and the trainer's log each fresh start it made on the manager's word.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.slurm.test_launch_slurm import _require_cluster  # noqa: F401 - the same skip (or fail) as there
from tests.slurm.test_slurm_roles import QUIET, jsonl, run_job

pytestmark = pytest.mark.slurm

GRAPH = ["layout.mode=distributed", "layout.num_actors=2", "layout.stall_seconds=600"]
# (config, experiment, overrides, best responses, the untrained network's exploitability)
GAMES = {
    "kuhn": ("configs/kuhn_psro.py", "kuhn_psro", ["psro.iterations=3", "total_env_steps=6144"], 3, 0.458),
    "leduc": ("configs/leduc_psro_distributed.py", "leduc_psro_distributed",
              ["psro.iterations=2", "env.num_envs=8", "total_env_steps=1024"], 2, 2.38),
}


@pytest.mark.parametrize("game", sorted(GAMES))
def test_psro_as_a_worker_graph(tmp_path: Path, game: str) -> None:
    config, experiment, size, responses, untrained = GAMES[game]
    run_dir, nodes, wall = run_job(tmp_path, config, experiment, "graph", *QUIET, *GRAPH, *size, timeout=600)
    assert {"trainer/0", "actor/0", "actor/1", "population/0"} <= set(nodes), nodes
    lines = jsonl(run_dir / "psro" / "psro.jsonl")
    assert [x["iteration"] for x in lines] == list(range(responses + 1))
    assert [x["policies"] for x in lines] == list(range(1, responses + 2))
    assert lines[0]["exploitability"] == pytest.approx(untrained, abs=0.02)
    for x in lines:
        payoff = np.array(x["payoff"])
        assert payoff.shape == (x["policies"],) * 2
        np.testing.assert_allclose(payoff, -payoff.T, atol=1e-5)
    manager = jsonl(run_dir / "workers" / "population-0.jsonl")[-1]
    assert manager["exploitability"] == pytest.approx(lines[-1]["exploitability"]), manager
    log = (run_dir / "logs" / "trainer-0.log").read_text()
    for k in range(1, responses):
        assert f"best response {k}: a fresh network" in log, log[-2000:]
    print(f"psro {game} on slurm: wall {wall:.0f} s, exploitability {[round(x['exploitability'], 3) for x in lines]}")
