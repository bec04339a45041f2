"""Faults around a trial (issue 43): two launches of one trial, damaged checkpoints, metrics a crash tore.

    PYTHONPATH=$PWD .venv/bin/python -m pytest tests/test_trial_faults.py -q

Real files, real locks (another process holds them), real orbax checkpoints damaged as a full disk or a copy
cut short leaves them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch import processes
from srljax.config import CheckpointConfig, EnvConfig, Experiment, LogConfig, PPOConfig, TrainerConfig
from srljax.loops.train import train
from srljax.storage import run_dir
from srljax.storage.run_dir import RunFolderInUse
from srljax.storage.steps import damage, read_meta, steps

ROOT = Path(__file__).resolve().parents[1]


def parity(root: Path, trial: str = "t", **changes) -> Experiment:
    cfg = Experiment(name="faults", trial=trial, seed=3, total_env_steps=4 * 4 * 5,
                     env=EnvConfig(factory="tests.parity_env:make_env", num_envs=4, max_episode_steps=4),
                     algo=PPOConfig(num_steps=4, hidden_sizes=(16,)),
                     trainer=TrainerConfig(num_minibatches=2, update_epochs=1),
                     log=LogConfig(run_root=str(root), wandb="disabled", progress="lines"),
                     checkpoint=CheckpointConfig(every_updates=1, keep=3))
    return dataclasses.replace(cfg, **changes)


def updates(folder: Path) -> list[int]:
    return [json.loads(line)["update"] for line in (folder / "metrics.jsonl").read_text().splitlines()]


HOLD = """
import sys, time
from srljax.storage import run_dir
from srljax.config import Experiment, LogConfig
cfg = Experiment(name=sys.argv[1], trial=sys.argv[2], log=LogConfig(run_root=sys.argv[3]))
run_dir.lock(cfg)
print("locked", flush=True)
time.sleep(600)
"""


@pytest.fixture
def held(tmp_path: Path):
    """Another process holding the lock of trial faults/t under tmp_path, as a live launch does."""
    folder = tmp_path / "faults" / "t"
    folder.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, "faults", "t", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_launch_holds_its_trial_and_death_releases_it(tmp_path: Path, held: subprocess.Popen) -> None:
    cfg = parity(tmp_path)
    found = run_dir.problems(cfg) + run_dir.problems(cfg, resume=True)
    assert len(found) == 2 and all(f"pid {held.pid} on host" in p and "--resume" in p for p in found), found
    with pytest.raises(RunFolderInUse, match=f"pid {held.pid}"):
        run_dir.claim(cfg)
    assert sorted(p.name for p in Path(cfg.run_dir).iterdir()) == [run_dir.LOCK]  # the refusal wrote nothing
    held.send_signal(signal.SIGKILL)  # no clean-up: the kernel lets go of a dead process's lock
    held.wait()
    assert run_dir.holder(cfg.run_dir) is None and run_dir.problems(cfg) == []  # an ended launch's lock file
    assert run_dir.claim(cfg) == Path(cfg.run_dir)
    assert f"pid {os.getpid()}" in (Path(cfg.run_dir) / run_dir.LOCK).read_text()
    run_dir.release(cfg.run_dir)


def test_a_second_launch_of_a_running_trial_exits_2_at_once(tmp_path: Path, held: subprocess.Popen) -> None:
    t0 = time.monotonic()
    single = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "-e", "faults", "-f",
                             "t", f"log.run_root={tmp_path}", "log.wandb=disabled"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert single.returncode == 2, single.stdout + single.stderr
    assert single.stderr.count("\n") == 1 and f"locked by pid {held.pid}" in single.stderr, single.stderr
    assert "Traceback" not in single.stderr and "run folder:" not in single.stdout  # refused before it started
    # distributed: refused before a name, key or worker is made (an earlier launch's actors stay its own)
    from srljax.config import load_file

    cfg = dataclasses.replace(load_file("configs/cartpole_ppo_distributed.py"), name="faults", trial="t",
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    assert processes.run_distributed(cfg) == 2
    assert sorted(p.name for p in Path(cfg.run_dir).iterdir()) == [run_dir.LOCK]
    assert time.monotonic() - t0 < 120


def trained(tmp_path: Path, trial: str) -> tuple[Experiment, Path]:
    cfg = parity(tmp_path, trial)
    train(cfg)
    folder = Path(cfg.run_dir)
    assert steps(folder / "checkpoints") == [3, 4, 5] and updates(folder) == [1, 2, 3, 4, 5]
    return cfg, folder


def test_resume_skips_a_newest_step_with_torn_metadata(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg, folder = trained(tmp_path, "torn")
    for f in (folder / "checkpoints" / "5").rglob("*"):  # as the bar does: every file over 200 bytes cut to 100
        if f.is_file() and f.stat().st_size > 200:
            os.truncate(f, 100)
    assert damage(folder / "checkpoints", 5) is not None and read_meta(folder / "checkpoints")[0] == 4
    capsys.readouterr()
    result = train(dataclasses.replace(cfg, total_env_steps=4 * 4 * 7), resume=True)
    out = capsys.readouterr().out
    assert "checkpoint step 5 is damaged" in out and "continuing from checkpoint step 4" in out, out
    assert "moved 1 line(s) of update 5" in out, out
    assert updates(folder) == [1, 2, 3, 4, 5, 6, 7] and result.metrics[0]["update"] == 5
    assert (folder / run_dir.DAMAGED / "5" / "state").is_dir()  # kept aside, not deleted
    assert [json.loads(x)["update"] for x in (folder / "metrics.discarded.jsonl").read_text().splitlines()] == [5]


def test_resume_falls_back_past_a_step_whose_array_data_is_cut(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    cfg, folder = trained(tmp_path, "data")
    cut = [f for f in (folder / "checkpoints" / "5" / "state").rglob("*")
           if f.is_file() and "/d/" in str(f) and f.stat().st_size > 200]
    assert cut
    for f in cut:  # the JSON files read: only orbax finds out
        os.truncate(f, 100)
    assert damage(folder / "checkpoints", 5) is None
    capsys.readouterr()
    train(dataclasses.replace(cfg, total_env_steps=4 * 4 * 7), resume=True)
    out = capsys.readouterr().out
    assert "checkpoint step 5 is damaged (orbax cannot restore it" in out, out
    assert "moved 1 line(s) of update 5" in out, out
    assert updates(folder) == [1, 2, 3, 4, 5, 6, 7]
    assert steps(folder / "checkpoints")[-1] == 7 and (folder / run_dir.DAMAGED / "5").is_dir()


def test_resume_says_what_it_discarded_from_metrics(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"update": 1}\n{"update": 2}\nnot json at all\n{"update": 3}\n{"update": 4}\n{"update": 5, "env_st')
    notes = run_dir.rollback_metrics(path, 3, report=True)
    assert len(notes) == 1 and "1 line(s) of update 4" in notes[0] and "2 unreadable line(s)" in notes[0], notes
    assert [json.loads(x)["update"] for x in path.read_text().splitlines()] == [1, 2, 3]
    moved = (tmp_path / "metrics.discarded.jsonl").read_text().splitlines()
    assert moved == ["not json at all", '{"update": 4}', '{"update": 5, "env_st']  # kept, one per line
    path.unlink()
    assert "is missing" in run_dir.rollback_metrics(path, 3, report=True)[0]
    assert run_dir.rollback_metrics(path, 0, report=True) == []  # nothing was logged yet: nothing to say
