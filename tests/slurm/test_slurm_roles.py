"""Every built-in role on the throw-away Slurm cluster (tests/slurm/cluster.sh), each as a user submits it.

    SLURM_TEST_NODES=3 bash tests/slurm/cluster.sh up
    SLURM_TEST_REQUIRED=1 .venv/bin/python -m pytest -m slurm tests/slurm/test_slurm_roles.py -s

Small trials of the shipped configs, one het job each: on-policy buffer workers, the eval worker, Ape-X replay
shards with an eval worker, two policies with a trainer each, 16 actors of the synthetic env across the
three nodes, and a self-play league (member trainers, their actors, the league manager). Each job must end ``done`` with exit 0, every worker of its graph must have run as a Slurm task,
and each role must have done its job (its own figures, read from the run folder). The trainer, policy worker,
actors, a custom role and PBT run in test_launch_slurm.py and test_slurm_pbt.py.
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

QUIET = ["log.wandb=disabled", "log.progress=lines"]
SMALL_PPO = [*QUIET, "algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=1"]


def run_job(tmp_path: Path, config: str, experiment: str, trial: str, *overrides: str,
            timeout: float = 900) -> tuple[Path, dict[str, str], float]:
    """Submit, wait for the job to leave the queue, check it ended done; (run folder, task -> node, wall s)."""
    run_dir = tmp_path / experiment / trial
    start = time.monotonic()
    job = submit(tmp_path, trial, *overrides, config=config)
    try:
        wait_for(lambda: not in_queue(job), timeout, f"job {job} finishing", run_dir / "logs")
    finally:
        if in_queue(job):
            sx("scancel", job)
    wall = time.monotonic() - start
    done = result(run_dir)
    assert (done["reason"], done["exit_code"]) == ("done", 0), done
    nodes = {}
    for path in (run_dir / "logs").glob("*-*.log"):
        found = re.search(r"\[slurm_task\] (\S+) on node (\S+)", path.read_text())
        if found:
            nodes[found.group(1)] = found.group(2)
    print(f"\n{experiment}/{trial} on slurm: job {job}, wall {wall:.0f} s, tasks {nodes}")
    return run_dir, nodes, wall


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def last_counter(run_dir: Path, worker: str, key: str) -> float:
    lines = jsonl(run_dir / "workers" / f"{worker}.jsonl")
    return max((x.get(key, 0) for x in lines), default=0)


def test_on_policy_buffer_workers(tmp_path: Path) -> None:
    run_dir, nodes, _ = run_job(tmp_path, "configs/cartpole_ppo_distributed.py", "cartpole_ppo_distributed", "buffers",
                                *SMALL_PPO, "layout.num_buffer_workers=2", "slurm.buffer.component=actor",
                                "total_env_steps=20480")
    assert {"trainer/0", "policy/0", "actor/0", "actor/1", "buffer/0", "buffer/1"} <= set(nodes), nodes
    assert nodes["buffer/0"] == nodes["actor/0"] != nodes["trainer/0"], nodes
    for i in (0, 1):  # both buffers passed segments on to the trainer
        assert last_counter(run_dir, f"buffer-{i}", "segments") > 0
    assert jsonl(run_dir / "metrics.jsonl")[-1]["env_steps"] >= 20480


def test_the_eval_worker(tmp_path: Path) -> None:
    run_dir, nodes, _ = run_job(tmp_path, "configs/cartpole_ppo_eval_distributed.py", "cartpole_ppo_eval_distributed",
                                "eval", *SMALL_PPO, "eval.every_updates=5", "eval.episodes=2",
                                "total_env_steps=20480")
    assert nodes["eval/0"] == nodes["trainer/0"] != nodes["actor/0"], nodes
    evals = jsonl(run_dir / "eval.jsonl")
    versions = [x["version"] for x in evals]
    # a periodic evaluation (it takes the newest version when it is free), then the last version's
    final = jsonl(run_dir / "metrics.jsonl")[-1]["update"]
    assert len(evals) >= 2 and versions == sorted(versions) and versions[-1] == final, (evals, final)
    assert all(x["episodes"] == 2 for x in evals if "episodes" in x), evals
    assert (run_dir / "best").exists()


def test_apex_replay_shards_with_an_eval_worker(tmp_path: Path) -> None:
    run_dir, nodes, _ = run_job(tmp_path, "configs/cartpole_apex_distributed.py", "cartpole_apex_distributed", "apex",
                                *QUIET, "layout.num_buffer_workers=2", "slurm.buffer.component=actor",
                                "total_env_steps=20000", "eval.every_updates=100", "eval.episodes=2")
    assert {"buffer/0", "buffer/1", "eval/0", "trainer/0"} <= set(nodes), nodes
    for i in (0, 1):  # both replay shards filled and were sampled
        lines = jsonl(run_dir / "workers" / f"buffer-{i}.jsonl")
        assert max(x.get("replay/size", x.get("size", 0)) for x in lines) > 0, lines[-1]
    assert jsonl(run_dir / "eval.jsonl"), "the eval worker wrote nothing"
    assert jsonl(run_dir / "metrics.jsonl")[-1]["update"] > 0


def test_two_policies_with_a_trainer_each(tmp_path: Path) -> None:
    run_dir, nodes, _ = run_job(tmp_path, "configs/lbf_two_policies_distributed.py", "lbf_two_policies_distributed",
                                "two", *QUIET, "algo.num_steps=32", "total_env_steps=8192",
                                "slurm.policy.component=actor")  # the trainers take a node each: 3 nodes in all
    assert {"trainer/0", "trainer/1"} <= set(nodes), nodes
    for i in (0, 1):  # each policy's trainer updated and logged
        lines = jsonl(run_dir / "workers" / f"trainer-{i}.jsonl")
        assert max(x.get("updates", 0) for x in lines) > 0, lines[-1]


def test_sixteen_synthetic_actors_across_the_three_nodes(tmp_path: Path) -> None:
    """The scaling bench's Slurm row, as a test: 16 actors (2 nodes) feeding one trainer (the third)."""
    steps = 16 * 16 * 32 * 12  # 12 updates of 16 actors x 16 envs x 32 steps
    run_dir, nodes, _ = run_job(
        tmp_path, "configs/cartpole_ppo_distributed.py", "cartpole_ppo_distributed", "synthetic16", *SMALL_PPO,
        "layout.num_actors=16", "layout.inference=inline", "env.num_envs=16", "trainer.batch_envs=256",
        "env.factory=envs.synthetic:make_synthetic", "env.options.step_ms=20.0", "slurm.actor.nodes=2",
        "slurm.actor.mem_gb_per_task=1",
        "trainer.num_minibatches=1", f"total_env_steps={steps}")
    actors = {k: v for k, v in nodes.items() if k.startswith("actor/")}
    assert len(actors) == 16 and len(set(actors.values())) == 2, nodes
    assert nodes["trainer/0"] not in actors.values(), nodes
    lines = jsonl(run_dir / "metrics.jsonl")
    assert lines[-1]["env_steps"] >= steps and lines[-1]["update"] == 12


def test_a_self_play_league(tmp_path: Path) -> None:
    """configs/connect_four_league.py on tic-tac-toe: three member trainers, their actors and the league manager
    as one het job; the manager took every actor's games and wrote the league's files."""
    run_dir, nodes, _ = run_job(tmp_path, "configs/connect_four_league.py", "connect_four_league", "league", *QUIET,
                                "env.options.game=tic_tac_toe", "total_env_steps=20000", "selfplay.snapshot_every=5",
                                "selfplay.bots=[random]", "selfplay.bot_games=20", "selfplay.bot_every_updates=0")
    assert {"trainer/0", "trainer/1", "trainer/2", "league/0", "actor/0", "actor/1", "actor/2"} <= set(nodes), nodes
    matches = json.loads((run_dir / "league" / "matches.json").read_text())
    games = matches["games"]
    assert all(sum(row) > 50 for row in games) and games[1][2] == 0, games  # the main exploiter plays only the main
    members = json.loads((run_dir / "league" / "members.json").read_text())
    assert [m["updates"] for m in members] == [19, 19, 19] and all(m["snapshots"] for m in members), members
    assert [r["opponent"] for r in jsonl(run_dir / "eval.jsonl")] == ["random"]
