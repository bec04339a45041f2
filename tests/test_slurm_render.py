"""``python -m launch.slurm`` without a cluster: the rendered script (golden), the plan, and bad input.

The golden file pins the sbatch script of a large layout (64 actors x 32 CPUs, 4 policy workers
x 1 GPU, one 8-GPU trainer node), so any change to what reaches Slurm shows up in review. After
an intended change, regenerate it and read the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_slurm_render.py -k golden
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from launch import slurm, slurm_jobs
from launch.sbatch import render, resolved
from launch.slurm_controller import GroupSteps
from launch.slurm_node import BIND_HOST_ENV, NODE_ADDR_ENV, node_address
from launch.slurm_plan import plan, slurm_problems, time_limit, time_limit_seconds
from launch.worker_env import task_env
from srljax.config import Experiment, apply_overrides, load_file

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
CARTPOLE = ROOT / "configs" / "cartpole_ppo_distributed.py"


@pytest.fixture(autouse=True)
def _no_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach a real Slurm: every command fails loudly unless a test fakes it."""

    def refuse(args: list[str], timeout: float = 0) -> None:
        raise AssertionError(f"unexpected Slurm command {args}")

    monkeypatch.setattr(slurm_jobs, "run", refuse)
    monkeypatch.chdir(ROOT)


def cartpole(*overrides: str) -> Experiment:
    cfg = apply_overrides(load_file(CARTPOLE), list(overrides))
    return resolved(dataclasses.replace(cfg, trial="t0"))


def test_golden_dry_run_of_a_large_layout(capsys: pytest.CaptureFixture[str]) -> None:
    code = slurm.main([str(GOLDEN / "slurm_large.py"), "-f", "golden", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    golden = GOLDEN / "slurm_large.sbatch"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(out)
    assert out == golden.read_text(), f"dry-run output changed; if intended: UPDATE_GOLDEN=1 pytest {__file__}"
    assert not Path("/shared/runs").exists()  # --dry-run writes nothing


def test_dry_run_writes_nothing_and_calls_no_slurm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = slurm.main([str(CARTPOLE), "-f", "dry", f"log.run_root={tmp_path}", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("#!/bin/bash")
    assert list(tmp_path.iterdir()) == []


def test_small_groups_share_a_component() -> None:
    comps = plan(cartpole())  # the config packs the policy worker with the trainer
    assert [c.describe() for c in comps] == ["trainer x1 + policy x1", "actor x2"]
    assert comps[0].options == ("--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--mem-per-cpu=3072M")
    assert [c.describe() for c in plan(cartpole("slurm.policy.component="))] == ["trainer x1", "policy x1", "actor x2"]
    assert [c.describe() for c in plan(cartpole("layout.inference=inline"))] == ["trainer x1", "actor x2"]


def test_rendered_script_runs_each_group_as_a_step() -> None:
    script = render(cartpole("slurm.setup=source .venv/bin/activate", "slurm.container_image=nvcr.io/x:1"))
    assert script.count("#SBATCH hetjob") == 1
    assert "--signal=B:USR1@300" in script and "--time=3-00:00:00" in script
    for role, group in (("trainer", 0), ("policy", 0), ("actor", 1)):
        assert f'--het-group={group} --exact' in script and f'launch.slurm_task "$RUN" {role} 0' in script
    assert "source .venv/bin/activate" in script and "--container-image=nvcr.io/x:1" in script


def test_time_limit_from_the_experiment_timeout() -> None:
    assert time_limit(cartpole()) == "3-00:00:00"  # the default timeout: 3 days
    assert time_limit(cartpole("timeout_seconds=5430")) == "0-01:31:00"  # rounded up to whole minutes
    assert time_limit(cartpole("slurm.time_limit=12:00:00")) == "12:00:00"
    assert [time_limit_seconds(t) for t in ("90", "1:30", "2:00:00", "1-2", "1-0:30", "3-00:00:00", "soon")] == [
        5400, 90, 7200, 93600, 88200, 259200, None]


def test_every_problem_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = slurm.main([str(CARTPOLE), "-f", "bad", f"log.run_root={tmp_path}", "slurm.node_gpus=4",
                       "slurm.trainer.gpus_per_task=8", "trainer.devices=8", "env.num_envs=8",
                       "slurm.policy.partition=other", "slurm.signal_seconds=600", "slurm.time_limit=5",
                       "slurm.actor.component=learner", "layout.transport=ipc"])
    err = capsys.readouterr().err
    assert code == 2 and list(tmp_path.iterdir()) == []
    for text in ["needs 8 GPU(s) but its nodes have 4 (slurm.node_gpus=4)",
                 "slurm.policy.partition='other' differs from its component's",
                 "slurm.signal_seconds=600 must be > 0 and below the time limit 5 (300 s)",
                 "slurm.actor.component='learner' is not a worker group",
                 "launch.slurm needs layout.transport=tcp"]:
        assert text in err, err


@pytest.mark.parametrize("overrides, text", [
    (["layout.mode=single", "layout.num_actors=1", "layout.inference=inline"], "run it with python -m launch.local"),
    (["slurm.actor.cpus_per_task=16", "slurm.node_cpus=8"], "needs 16 CPUs but its nodes have 8"),
    (["slurm.trainer.gpus_per_task=1", "slurm.trainer.node_gpus=0"], "slurm.trainer.node_gpus=0"),
    (["layout.policy_device=gpu"], "layout.policy_device=gpu but slurm.policy.gpus_per_task=0"),
    (["slurm.policy.nodes=2"], "a packed group runs on its component's one node"),
    (["slurm.actor.nodes=3"], "slurm.actor.nodes=3 is more than its 2 tasks"),
])
def test_bad_resources(overrides: list[str], text: str) -> None:
    assert any(text in p for p in slurm_problems(cartpole(*overrides))), slurm_problems(cartpole(*overrides))


def test_refusals_leave_nothing_behind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(slurm, "jobs_named", lambda name: calls.append(name) or ["41"])
    argv = [str(CARTPOLE), "-f", "busy", f"log.run_root={tmp_path}"]
    assert slurm.main(argv) == 1
    assert "already queued or running as job 41" in capsys.readouterr().err and calls == ["cartpole_ppo_distributed/busy"]
    assert list(tmp_path.iterdir()) == []

    # sbatch refuses: an existing run folder is put back as it was, a new one removed
    monkeypatch.setattr(slurm, "jobs_named", lambda name: [])
    monkeypatch.setattr(slurm, "partition_nodes", lambda: ({}, ""))

    def refuse(script: Path) -> str:
        assert script.is_file() and (script.parents[1] / "config.json").is_file()  # written before sbatch reads it
        raise slurm_jobs.SlurmError("sbatch refused the job (exit 1):\n  sbatch: error: invalid partition")

    monkeypatch.setattr(slurm, "sbatch", refuse)
    assert slurm.main(argv) == 1 and list(tmp_path.iterdir()) == []
    run_dir = tmp_path / "cartpole_ppo_distributed" / "busy"
    (run_dir / "slurm").mkdir(parents=True)
    (run_dir / "config.json").write_text("earlier\n")
    (run_dir / "slurm" / "result.json").write_text("{}\n")
    assert slurm.main(argv) == 1
    assert "invalid partition" in capsys.readouterr().err
    assert (run_dir / "config.json").read_text() == "earlier\n" and (run_dir / "slurm" / "result.json").exists()
    assert not (run_dir / "slurm" / "job.sh").exists()

    (run_dir / "checkpoints" / "120").mkdir(parents=True)
    assert slurm.main(argv) == 1
    assert "already holds checkpoints (steps 120)" in capsys.readouterr().err


def test_task_environment_matches_the_local_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch.processes import worker_env

    for preset in ({}, {"XLA_FLAGS": "--xla_dump_to=/tmp/x", "JAX_PLATFORMS": "cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}):
        for key in ("XLA_FLAGS", "JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE"):
            monkeypatch.delenv(key, raising=False)
        for key, value in preset.items():
            monkeypatch.setenv(key, value)
        for role in ("trainer", "policy", "actor", "buffer"):
            assert {**os.environ, **task_env(role, os.environ)} == worker_env(role), (role, preset)


def test_node_address_and_bind_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert node_address({NODE_ADDR_ENV: "10.0.0.7", "SLURMD_NODENAME": "n1"}) == "10.0.0.7"
    assert node_address({}) == node_address({"SLURMD_NODENAME": ""})  # this host's own name, resolved
    from srljax.system.common import bind_address

    cfg = cartpole()
    assert bind_address(cfg) == "tcp://127.0.0.1:*"
    monkeypatch.setenv(BIND_HOST_ENV, "10.0.0.7")
    assert bind_address(cfg) == "tcp://10.0.0.7:*"


def test_controller_sees_a_group_whose_step_ended(tmp_path: Path) -> None:
    steps = GroupSteps(tmp_path, {"trainer": 1, "actor": 2})
    assert steps.exited() == {}
    (tmp_path / "slurm" / "exit").mkdir(parents=True)
    (tmp_path / "slurm" / "exit" / "actor").write_text("137\n")
    assert steps.exited() == {"actor/0": 137, "actor/1": 137}
    assert "never started" in steps.tail("actor/1")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "actor-1.log").write_text("a\nTraceback: boom\n")
    assert steps.tail("actor/1").splitlines()[-1] == "  | Traceback: boom"
