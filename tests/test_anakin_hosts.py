"""The Anakin loop over two processes (``trainer.num_hosts=2``, one ``jax.distributed`` group on this machine) learns
as one process does, stops together on SIGTERM with its checkpoint, and resumes exactly; bad combinations are refused.

    .venv/bin/pytest tests/test_anakin_hosts.py -q -m slow      # ~2-4 minutes on 2 busy cores

Every run is ``python -m launch.local configs/gymnax_cartpole_ppo.py`` with the same small overrides; the two-process
runs add ``trainer.num_hosts=2`` (``launch/hosts.py``: each process owns one CPU device, the envs split 2 + 2).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/gymnax_cartpole_ppo.py"
UPDATES = 24
SMALL = ["algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=2", "trainer.anneal_lr=false",
         f"total_env_steps={UPDATES * 4 * 32}", "checkpoint.every_updates=2", "log.wandb=disabled",
         "log.progress=lines"]
KEYS = ("episode_return", "policy_loss", "value_loss", "entropy", "grad_norm")


def launch(run_root: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    return subprocess.Popen([sys.executable, "-m", "launch.local", CONFIG, f"log.run_root={run_root}", *SMALL, *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 400) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group's processes catch SIGTERM (JAX's preemption notice)
        out, _ = proc.communicate()
        raise AssertionError(f"launch did not end within {timeout:g} s:\n{out[-4000:]}") from None
    return proc.returncode, out


def lines(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def assert_same_learning(one: list[dict], two: list[dict]) -> None:
    assert [m["update"] for m in one] == [m["update"] for m in two] == list(range(1, UPDATES + 1))
    for a, b in zip(one, two):
        assert a["env_steps"] == b["env_steps"]
        for key in KEYS:
            np.testing.assert_allclose(a[key], b[key], rtol=2e-3, atol=1e-4, err_msg=f"update {a['update']} {key}")


@pytest.mark.slow
def test_two_processes_learn_as_one_and_resume_exactly(tmp_path: Path) -> None:
    pytest.importorskip("gymnax")
    code, out = finish(launch(tmp_path, "-f", "one"))
    assert code == 0, out[-4000:]
    one = lines(tmp_path / "gymnax_cartpole_ppo" / "one")

    # two processes, stopped by a SIGTERM to the launcher once the first lines are in: both stop at one call
    run_dir = tmp_path / "gymnax_cartpole_ppo" / "two"
    proc = launch(tmp_path, "-f", "two", "trainer.num_hosts=2")
    deadline = time.monotonic() + 300
    while not lines(run_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    code, out = finish(proc)
    assert "2 processes in one jax.distributed group" in out, out[-4000:]
    assert code == 130, f"exit {code}, expected 130 (stopped before the end):\n{out[-4000:]}"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["reason"] == "interrupted" and status["exit_code"] == 130, status
    stopped = lines(run_dir)
    steps = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert 0 < len(stopped) < UPDATES and steps[-1] == stopped[-1]["update"], (len(stopped), steps)

    code, out = finish(launch(tmp_path, "-f", "two", "--resume"))
    assert code == 0, out[-4000:]
    assert f"resumed from the checkpoint of update {steps[-1]}" in out, out[-4000:]
    two = lines(run_dir)
    assert json.loads((run_dir / "status.json").read_text())["reason"] == "done"
    assert_same_learning(one, two)


def test_bad_combinations_are_refused() -> None:
    pytest.importorskip("gymnax")
    from srljax.config import ConfigError, apply_overrides, load_file
    from srljax.prepare import problems

    base = load_file(str(ROOT / CONFIG))

    def refused(*overrides: str, backend: str | None = None) -> str:
        found = problems(apply_overrides(base, list(overrides)), backend)
        assert found, overrides
        return "\n".join(found)

    assert problems(apply_overrides(base, ["trainer.num_hosts=2"])) == []
    assert "env.num_envs=6 does not split over trainer.devices=1 x trainer.num_hosts=4" in refused(
        "trainer.num_hosts=4", "env.num_envs=6")
    assert "make env.num_envs a multiple of 4" in refused("trainer.num_hosts=2", "trainer.devices=2", "env.num_envs=6")
    assert "with algo=dqn: the Anakin loop over several hosts runs segment algorithms" in refused(
        "algo=dqn", "trainer.num_hosts=2")
    assert "a pack of seeds runs on one host" in refused("trainer.num_hosts=2", "seeds=[1,2]")
    # an envpool env has no Anakin loop: several trainer processes still need the distributed layout
    assert "needs a trainer group: set layout.mode=distributed" in refused(
        "env.id=CartPole-v1", "trainer.num_hosts=2")
    with pytest.raises(ConfigError):
        apply_overrides(base, ["trainer.num_hosts=two"])


def test_slurm_renders_one_job_of_one_process_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch.slurm`` takes the same config: one plain job (no het job, no controller) whose one ``srun`` step runs a
    ``launch/hosts.py`` process per node, stops reaching them as ``scancel --signal=TERM``; its resources checked."""
    pytest.importorskip("gymnax")
    import dataclasses

    from launch.slurm.plan import plan, slurm_problems
    from launch.slurm.sbatch import render, resolved
    from srljax.config import apply_overrides, load_file

    monkeypatch.chdir(ROOT)
    cfg = apply_overrides(load_file(str(ROOT / CONFIG)), ["trainer.num_hosts=2", "slurm.trainer.cpus_per_task=2"])
    cfg = resolved(dataclasses.replace(cfg, trial="t0"))
    assert slurm_problems(cfg) == []
    (comp,) = plan(cfg)
    assert comp.nodes == 2 and [g.role for g in comp.groups] == ["trainer"], comp
    script = render(cfg)
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script and "hetjob" not in script
    assert '"$PY" -m launch.hosts "$RUN" --slurm' in script and "launch.slurm.controller" not in script
    assert 'scancel --signal=TERM "$SLURM_JOB_ID.0"' in script and "--cpus-per-task=2" in script
    bad = apply_overrides(cfg, ["slurm.trainer.nodes=3", "slurm.trainer.gpus_per_task=1", "trainer.devices=2"])
    found = "\n".join(slurm_problems(bad))
    assert "slurm.trainer.nodes=3 but trainer.num_hosts=2" in found, found
    assert "trainer.devices=2 but slurm.trainer.gpus_per_task=1" in found, found


def test_too_few_gpus_for_the_processes_is_refused_before_the_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """On one machine each process takes its own ``trainer.devices`` GPUs: two processes on one GPU are refused with
    one line (exit 2) before the trial's folder exists."""
    pytest.importorskip("gymnax")
    import dataclasses

    from launch.local import main
    from srljax.config import apply_overrides, load_file

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    cfg = apply_overrides(load_file(str(ROOT / CONFIG)), ["trainer.num_hosts=2", f"log.run_root={tmp_path}"])
    assert main(dataclasses.replace(cfg, trial="gpus")) == 2
    assert "trainer 1 on this node needs GPUs 1..1 (trainer.devices=1) but the node has 1: 0" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
