"""Issue 41's multi-agent work as worker graphs on the throw-away Slurm cluster (tests/slurm/cluster.sh).

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_marl.py -s

MAPPO on JaxMARL's envs (``layout.mode=distributed``): two actors stepping the env on the host
(``envs/jax_envs/host.py``) and a trainer, one het job, for SMAX 3m, Overcooked cramped_room and Hanabi. The job must
end ``done`` with exit 0, both actors and the trainer must have run as Slurm tasks, and the trainer's lines must
carry the episodes the actors sent (SMAX: its outcomes, ``win_rate``; SMAX and Hanabi: the legal-action flags that
reached the policy). QMIX (``configs/smax_3m_qmix.py``) as Ape-X's graph: two actors, a replay buffer worker and the
trainer, whose lines carry the gradient steps' loss, the actors' epsilon and SMAX's outcomes. Slow: each task compiles
its env's step (minutes on a crowded 2-core box; the compile cache makes a second run faster).
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
GRAPH = ["layout.mode=distributed", "layout.num_actors=2", "layout.inference=inline", "env.num_envs=8",
         "algo.num_steps=32", "trainer.batch_envs=16", "trainer.num_minibatches=2", "trainer.update_epochs=2",
         "log.window=50", "layout.stall_seconds=1200"]

MAPPO = {  # config, experiment name, extra overrides, (least, most) mean legal actions per agent row or None
    "smax": ("configs/smax_3m_mappo.py", "smax_3m_mappo", [], (1.0, 8.0)),
    # 64-step episodes (cramped_room's are 400): several end within the 6 updates
    "overcooked": ("configs/overcooked_cramped_room_ppo.py", "overcooked_cramped_room_ppo",
                   ["env.max_episode_steps=64"], None),
    "hanabi": ("configs/hanabi_mappo.py", "hanabi_mappo", [], (1.0, 21.0)),
}


@pytest.mark.parametrize("env", list(MAPPO))
def test_mappo_as_a_worker_graph(tmp_path: Path, env: str) -> None:
    config, experiment, extra, legal = MAPPO[env]
    steps = 16 * 32 * 6  # 6 updates
    run_dir, nodes, _ = run_job(tmp_path, config, experiment, "graph", *QUIET, *GRAPH, *extra,
                                f"total_env_steps={steps}", timeout=1800)
    assert {"trainer/0", "actor/0", "actor/1"} <= set(nodes), nodes
    lines = jsonl(run_dir / "metrics.jsonl")
    assert lines[-1]["update"] == 6 and lines[-1]["env_steps"] >= steps, lines[-1]
    assert all(math.isfinite(x["value_loss"]) for x in lines), lines[-1]
    assert lines[-1]["episodes"] > 0 and math.isfinite(lines[-1]["episode_return"]), lines[-1]
    won = [x for x in lines if "win_rate" in x]
    if env == "smax":
        assert won and all(0.0 <= x["win_rate"] <= 1.0 for x in won), lines[-1]
    else:
        assert not won, lines[-1]  # only SMAX reports outcomes
    if legal:
        assert legal[0] < lines[-1]["legal_actions"] < legal[1], lines[-1]


def test_qmix_as_an_ape_x_graph(tmp_path: Path) -> None:
    """Two actors acting QMIX's GRU agents epsilon-greedily on SMAX 3m, one replay buffer worker keeping their rows
    (with the GRU state each was acted with), the trainer sampling sequences of 17 rows from it."""
    steps = 2 * 8 * 16 * 8  # 8 chunks of 16 rows from each actor's 8 envs
    run_dir, nodes, _ = run_job(
        tmp_path, "configs/smax_3m_qmix.py", "smax_3m_qmix", "graph", *QUIET, "layout.mode=distributed",
        "layout.num_actors=2", "layout.num_buffer_workers=1", "env.num_envs=8", "algo.num_steps=16",
        "algo.batch_size=16", "algo.learning_starts=512", "algo.replay_capacity=16384", "log.window=50",
        "layout.stall_seconds=1200", f"total_env_steps={steps}", timeout=1800)
    assert {"trainer/0", "buffer/0", "actor/0", "actor/1"} <= set(nodes), nodes
    lines = jsonl(run_dir / "metrics.jsonl")
    # 4 gradient steps per 8 x 16 env steps after the first 512: (2048 - 512) / 128 x 4
    assert lines[-1]["update"] == 48 and lines[-1]["env_steps"] >= 512, lines[-1]
    assert all(math.isfinite(x["loss"]) for x in lines) and lines[-1]["loss"] > 0, lines[-1]
    assert 0.0 < lines[-1]["epsilon/actor_0"] <= 1.0 and lines[-1]["replay_size"] > 0, lines[-1]
    won = [x for x in lines if "win_rate" in x]
    assert won and all(0.0 <= x["win_rate"] <= 1.0 for x in won), lines[-1]
