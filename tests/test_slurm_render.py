"""``python -m launch.slurm`` without a cluster: the rendered script (golden), the plan, and bad input.

The golden file pins the sbatch script of a large layout (64 actors x 32 CPUs, 4 policy workers
x 1 GPU, one 8-GPU trainer node), so any change to what reaches Slurm shows up in review. After
an intended change, regenerate it and read the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_slurm_render.py -k golden
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launch.slurm import jobs as slurm_jobs
from launch.slurm import plan as slurm_plan
from launch.slurm import submit as slurm
from launch.slurm.controller import CANCELLED_EXIT_CODE, TIME_LIMIT_EXIT_CODE, GroupSteps
from launch.slurm.node import NODE_ADDR_ENV, node_address
from launch.slurm.plan import plan, slurm_problems, time_limit, time_limit_seconds
from launch.slurm.sbatch import render, resolved
from launch.slurm.trial import RunFiles, Trial
from srljax.comm.hosts import BIND_HOST_ENV
from srljax.config import Experiment, apply_overrides, load_file
from srljax.layout import Layout, WorkerGroup, build_layout

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
        assert f'--het-group={group} --exact' in script and f'launch.slurm.task "$RUN" {role} 0' in script
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
    (["slurm.actor.nodes=2", "slurm.policy.component=actor"], "but actor spans slurm.actor.nodes=2 nodes"),
    # a multi-host trainer spans trainer.num_hosts nodes, one task each, and takes no other group
    (["trainer.num_hosts=2"], "slurm.policy.component=trainer, but trainer spans trainer.num_hosts=2 nodes "
                              "(one task each) and a component holding several groups is one node: give policy a "
                              "component of its own (slurm.policy.component=) or pack it with another group "
                              "(slurm.policy.component=actor)"),
    (["trainer.num_hosts=2", "slurm.policy.component=actor", "slurm.trainer.nodes=3"],
     "slurm.trainer.nodes=3 but trainer.num_hosts=2: the trainer runs one task per node"),
    (["trainer.num_hosts=2", "slurm.policy.component=actor", "slurm.trainer.component=actor"],
     "slurm.trainer.component=actor: trainer.num_hosts=2 runs one trainer per node on 2 nodes"),
    (["slurm.custom.component=nope"], "slurm.custom.component='nope' is not a worker group; use one of trainer, "
                                      "buffer, policy, league, actor"),
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
    run_dir.mkdir(parents=True)  # an existing empty folder is fine, and stays empty
    assert slurm.main(argv) == 1
    assert "invalid partition" in capsys.readouterr().err
    assert list(run_dir.iterdir()) == []

    # an earlier run's folder (its job may still run) is refused before anything is written or asked of Slurm
    (run_dir / "checkpoints" / "120").mkdir(parents=True)
    monkeypatch.setattr(slurm, "jobs_named", lambda name: pytest.fail("no Slurm command for a refused folder"))
    assert slurm.main(argv) == 1
    err = capsys.readouterr().err
    assert f"run folder {run_dir} is not empty (checkpoints)" in err and "nothing was submitted" in err, err
    assert [p.name for p in run_dir.iterdir()] == ["checkpoints"]


def test_multi_host_trainer_runs_one_task_per_node() -> None:
    cfg = cartpole("trainer.num_hosts=2", "slurm.policy.component=actor")
    assert slurm_problems(cfg) == []
    comps = plan(cfg)
    assert [(c.describe(), c.nodes) for c in comps] == [("trainer x2", 2), ("policy x1 + actor x2", 1)]
    assert comps[0].options == ("--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=1",
                                "--mem-per-cpu=4096M")
    script = render(cfg)
    assert ('srun --het-group=0 --exact --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=1 '
            '--mem-per-cpu=4096M \\\n    "$PY" -m launch.slurm.task "$RUN" trainer 0;') in script, script
    assert "# component 0: trainer x2 (the batch script and the controller run on its first node)" in script
    # slurm.trainer.nodes, if set, must say the same; one host stays the one-node component it was
    assert slurm_problems(cartpole("trainer.num_hosts=2", "slurm.policy.component=actor", "slurm.trainer.nodes=2")) == []
    assert plan(cartpole("slurm.policy.component="))[0].options == (
        "--ntasks=1", "--cpus-per-task=1", "--mem-per-cpu=4096M")


def with_custom_role(monkeypatch: pytest.MonkeyPatch, role: str = "norm_logger", count: int = 1) -> None:
    """``build_layout`` as it is with a user-defined role in ``layout.custom_roles`` (a group of its own)."""

    def layout(cfg: Experiment) -> Layout:
        real = build_layout(cfg)
        return dataclasses.replace(real, groups=(*real.groups, WorkerGroup(role, count)))

    monkeypatch.setattr(slurm_plan, "build_layout", layout)


def test_custom_roles_take_slurm_custom(monkeypatch: pytest.MonkeyPatch) -> None:
    with_custom_role(monkeypatch, count=2)
    cfg = cartpole("slurm.custom.cpus_per_task=3", "slurm.custom.mem_gb_per_task=1", "slurm.custom.partition=cpu")
    assert slurm_problems(cfg) == []
    *_, comp = plan(cfg)
    assert comp.describe() == "norm_logger x2" and comp.partition == "cpu"
    assert comp.options == ("--ntasks=2", "--cpus-per-task=3", "--mem-per-cpu=342M", "--partition=cpu")
    assert 'launch.slurm.task "$RUN" norm_logger 0; echo $? > "$RUN/slurm/exit/norm_logger"; } &' in render(cfg)

    # packed with the actors (a role of the layout is a valid component); and actors packed with it
    cfg = cartpole("slurm.custom.component=actor")
    assert slurm_problems(cfg) == []
    assert [c.describe() for c in plan(cfg)] == ["trainer x1 + policy x1", "actor x2 + norm_logger x2"]
    assert [c.describe() for c in plan(cartpole("slurm.actor.component=norm_logger"))] == [
        "trainer x1 + policy x1", "actor x2 + norm_logger x2"]
    found = slurm_problems(cartpole("slurm.custom.component=nope", "slurm.custom.nodes=9"))
    assert found == ["slurm.custom.component='nope' is not a worker group; use one of trainer, buffer, policy, "
                     "league, actor, eval, population, norm_logger", "slurm.custom.nodes=9 is more than its 2 tasks"], found


@pytest.mark.parametrize("sig, code, reason", [(signal.SIGUSR1, TIME_LIMIT_EXIT_CODE, "time_limit"),
                                               (signal.SIGTERM, CANCELLED_EXIT_CODE, "cancelled"),
                                               (signal.SIGINT, 0, "stopped")])
def test_controller_signals(tmp_path: Path, sig: signal.Signals, code: int, reason: str) -> None:
    """Slurm's time-limit warning and ``scancel`` (SIGTERM) fail the trial (non-zero: it did not finish);
    ``launch.slurm stop`` (SIGINT) does not."""
    from srljax.system.shell import auth

    cfg = auth.resolved(cartpole(f"log.run_root={tmp_path}"), slurm=True)  # as submit writes it: auth on
    trial = Trial(Path(cfg.run_dir))
    auth.prepare(cfg, trial.run_dir)  # RUN_DIR/keys, which the controller loads
    RunFiles(trial).write_config(cfg)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    proc = subprocess.Popen([sys.executable, "-m", "launch.slurm.controller", str(trial.run_dir)], cwd=ROOT,
                            env={**env, "SRLJAX_BIND_HOST": "127.0.0.1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]  # its handlers are installed before it says where it is
        assert lines[0].startswith("[slurm_controller]"), lines
        proc.send_signal(sig)
        out = lines[0] + proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    assert proc.returncode == code, out
    result = trial.read(trial.result)
    assert (result["exit_code"], result["reason"]) == (code, reason), result
    assert trial.outcome() == result
    status = json.loads((trial.run_dir / "status.json").read_text())  # the Controller's, as in every backend
    assert (status["exit_code"], status["reason"]) == (code, reason), status
    assert ("finished: " if code == 0 else "FAILED: ") in out, out
    trial.result.unlink()
    assert trial.outcome()["reason"] == reason  # status falls back to the Controller's file


def test_task_environment_matches_the_local_launcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A Slurm task that Slurm gave the GPUs the local rule would pick starts its worker with the same
    environment as ``launch.local`` does (``srljax.parallel.devices``), read off ``launch.slurm.task`` itself."""
    from launch.processes import worker_env
    from launch.slurm import task
    from srljax.config import write_json

    cfg = apply_overrides(load_file(CARTPOLE), [
        "trainer.devices=4", "trainer.memory_fraction=0.5", "layout.num_policy_workers=2", "layout.policy_device=gpu",
        "layout.num_actors=5", "layout.actor_device=gpu", "layout.memory_fraction=0.1", "layout.num_buffer_workers=1"])
    run_dir = tmp_path / "run"
    write_json(cfg, run_dir / "config.json")
    base = {"PATH": os.environ.get("PATH", ""), "XLA_FLAGS": "--xla_dump_to=/tmp/x", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"}
    slurm_only = ("SLURM_PROCID", "SLURM_LOCALID", BIND_HOST_ENV)

    class Exec(Exception):
        pass

    def execv(path: str, argv: list[str]) -> None:
        started.append((argv[1:], dict(os.environ)))
        raise Exec

    monkeypatch.setattr(os, "dup2", lambda fd, fd2: None)  # keep pytest's output where it is
    monkeypatch.setattr(os, "execv", execv)
    monkeypatch.setattr(task, "node_address", lambda: "10.0.0.9")
    gpus = set()
    for role, index in build_layout(cfg).workers():
        local = worker_env(cfg, role, index, {**base, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
        slurm_env = {**base, "SLURM_PROCID": str(index), "SLURM_LOCALID": str(index)}
        if local["CUDA_VISIBLE_DEVICES"]:  # --gpus-per-task: Slurm binds the task's own GPUs
            slurm_env["CUDA_VISIBLE_DEVICES"] = local["CUDA_VISIBLE_DEVICES"]
        monkeypatch.setattr(os, "environ", slurm_env)
        started: list[tuple[list[str], dict[str, str]]] = []
        with pytest.raises(Exec):
            task.main([str(run_dir), role, "0"])
        ((argv, env),) = started
        assert argv == ["-m", "srljax.system.shell.run", str(run_dir), role, str(index)]
        assert {k: v for k, v in env.items() if k not in slurm_only} == local, (role, index)
        gpus.add(local["CUDA_VISIBLE_DEVICES"])
    assert gpus == {"0,1,2,3", "", "4", "5", "6", "7"}  # the rule placed something on every GPU


def test_node_address_and_bind_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert node_address({NODE_ADDR_ENV: "10.0.0.7", "SLURMD_NODENAME": "n1"}) == "10.0.0.7"
    assert node_address({}) == node_address({"SLURMD_NODENAME": ""})  # this host's own name, resolved
    from srljax.system.shell.common import bind_address

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
