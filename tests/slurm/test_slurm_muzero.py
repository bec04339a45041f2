"""MuZero as a worker graph on the throw-away Slurm cluster (tests/slurm/cluster.sh): the SRL way, search batched
at a policy worker, a buffer worker reanalysing, one trainer.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_muzero.py -s

``configs/cartpole_muzero_distributed.py`` with remote inference (the policy worker runs the search for both
actors' rows, packed into the trainer's het-job component) for 8 updates. The job must end ``done`` with exit 0, every role must have run as a Slurm task, the
buffer must have sent the trainer its batches with part of each batch's windows reanalysed by the trainer's
params (``reanalyse/share`` > 0, a params version it followed), and the trainer must have trained every update.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slurm.test_launch_slurm import _require_cluster  # noqa: F401 - the same skip (or fail) as there
from tests.slurm.test_slurm_roles import QUIET, jsonl, last_counter, run_job

pytestmark = pytest.mark.slurm

UPDATES = 8
GRAPH = ["layout.inference=remote", "layout.num_policy_workers=1", "slurm.policy.component=trainer", f"total_env_steps={UPDATES * 256}",
         "trainer.num_minibatches=2", "layout.stall_seconds=600", "layout.heartbeat_timeout_seconds=60"]


def test_muzero_as_a_worker_graph_with_reanalyse(tmp_path: Path) -> None:
    run_dir, nodes, wall = run_job(tmp_path, "configs/cartpole_muzero_distributed.py", "cartpole_muzero_distributed", "graph",
                                   *QUIET, *GRAPH, timeout=900)
    assert {"trainer/0", "actor/0", "actor/1", "buffer/0", "policy/0"} <= set(nodes), nodes
    metrics = jsonl(run_dir / "metrics.jsonl")
    assert max(m["update"] for m in metrics) >= UPDATES, metrics[-1]
    assert last_counter(run_dir, "buffer-0", "batches_sent") >= UPDATES
    buffer = jsonl(run_dir / "workers" / "buffer-0.jsonl")
    assert max(x.get("reanalyse/share", 0) for x in buffer) > 0, buffer[-1]
    assert max(x.get("reanalyse_params_version", -1) for x in buffer) >= 1, buffer[-1]
    print(f"muzero on slurm: wall {wall:.0f} s, {max(m['update'] for m in metrics)} updates")
