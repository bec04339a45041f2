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
    # the refusal wrote nothing: the lock and the room the holder keeps for its status.json on a full disk
    assert sorted(p.name for p in Path(cfg.run_dir).iterdir()) == sorted([run_dir.LOCK, run_dir.RESERVE])
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
    from launch.threads import run_threads

    with pytest.raises(RunFolderInUse, match=f"pid {held.pid}"):  # the threads backend: the same lock
        run_threads(cfg)
    assert sorted(p.name for p in Path(cfg.run_dir).iterdir()) == sorted([run_dir.LOCK, run_dir.RESERVE])  # the holder's
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


FLOODED = """
import resource, sys, time
import numpy as np
resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))
from srljax.comm.samples import SampleReceiver
from srljax.storage.checkpoint import Checkpointer
receiver = SampleReceiver("tcp://127.0.0.1:*", "faults/t")
ckpt = Checkpointer(sys.argv[1])
print(receiver.address, flush=True)
sys.stdin.readline()  # the flood is on
from srljax.storage.descriptors import free_files
print("free", free_files(), flush=True)
began = time.monotonic()
ckpt.save(1, {"w": np.arange(1000.0)}, meta={"env_steps": 1})
ckpt.close()
print(f"saved after {time.monotonic() - began:.1f} s", receiver.counters(), flush=True)
"""


def test_a_flood_of_idle_connections_delays_a_checkpoint_and_fails_nothing(tmp_path: Path) -> None:
    import socket

    proc = subprocess.Popen([sys.executable, "-c", FLOODED, str(tmp_path / "checkpoints")], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        host, port = proc.stdout.readline().strip().removeprefix("tcp://").rsplit(":", 1)
        held = []
        for _ in range(400):  # more than the process may open: no key, no greeting, just held
            try:
                held.append(socket.create_connection((host, int(port)), timeout=1))
            except OSError:
                pass
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        for conn in held:
            conn.close()
    assert proc.returncode == 0, out
    assert int(out.split()[1]) < 64, out  # the flood had taken what a save needs
    assert "checkpoint step 1: too many open files" in out and "written after waiting" in out, out
    assert "saved after" in out and steps(tmp_path / "checkpoints") == [1], out
    assert damage(tmp_path / "checkpoints", 1) is None


def test_values_that_would_crash_later_are_refused_by_the_checks(tmp_path: Path) -> None:
    from srljax.config import problems

    base = parity(tmp_path)
    wrong = dataclasses.replace(base, trainer=dataclasses.replace(base.trainer, lr="fast", num_minibatches=2.5),
                                env=dataclasses.replace(base.env, num_envs="8"))
    found = problems(wrong)  # a Python config sets what it likes; the validator must not raise
    assert len(found) == 3, found
    assert any(p.startswith("trainer.lr='fast' (str) must be a number") for p in found), found
    assert any(p.startswith("trainer.num_minibatches=2.5 (float) must be a whole number") for p in found), found
    assert any(p.startswith("env.num_envs='8' (str) must be a whole number") for p in found), found
    for seed in (2**31 - 1, 10**30):  # seed=1e30 on the command line is the integer 10**30
        found = problems(dataclasses.replace(base, seed=seed))
        assert len(found) == 1 and found[0].startswith(f"seed={seed} is too large") and "below" in found[0], found
    assert problems(dataclasses.replace(base, seed=2**31 - 20_000)) == []


def test_seed_and_type_refusals_reach_the_command_line_as_one_message(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py",
                          f"log.run_root={tmp_path}", "seed=2147483647", "log.wandb=disabled"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "seed=2147483647 is too large" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir())  # nothing was created


def test_a_run_root_that_cannot_be_written_is_refused_before_launch(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(root)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only filesystem here: {made.stderr.decode().strip()}")
    try:
        out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", f"log.run_root={root}",
                              "log.wandb=disabled"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert f"cannot write under {root}" in out.stderr and "read-only file system" in out.stderr, out.stderr
    assert "log.run_root" in out.stderr and "run folder:" not in out.stdout
    assert run_dir.writable_problem(tmp_path / "a" / "b") is None and not (tmp_path / "a").exists()


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real filesystem of 4 MB (tmpfs; needs the right to mount, else the test is skipped)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {made.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow  # two runs of ~25 s each
def test_a_full_disk_stops_a_single_process_run_at_its_first_failed_save(small_disk: Path) -> None:
    fill = small_disk / "filler"
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "-f", "full",
                          f"log.run_root={small_disk}", "total_env_steps=20480", "checkpoint.every_updates=2",
                          "log.wandb=disabled", "log.progress=lines", "compile_cache=off"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]  # fits: a 20-update run with its checkpoints
    folder = small_disk / "cartpole_ppo" / "full"
    first = steps(folder / "checkpoints")
    # now the disk is full: whatever is left goes to a filler file, and the trial is resumed
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    fill.write_bytes(b"\0" * max(0, free - 16 * 1024))
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "-f", "full", "--resume",
                          f"log.run_root={small_disk}", "total_env_steps=40960", "compile_cache=off"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text[-3000:]
    failed = [line for line in out.stdout.splitlines() if line.startswith("FAILED: ")]
    assert len(failed) == 1 and "No space left on device" in failed[0] and "free space" in failed[0], text[-3000:]
    assert "launch/local.py" not in out.stderr and "ERROR:absl" not in out.stderr, \
        [line for line in out.stderr.splitlines() if "local.py" in line or "absl" in line]
    lines = updates(folder)
    # stopped at the first failed save: its background write is seen failed by the next update or the one after
    assert lines[:20] == list(range(1, 21)) and len(lines) <= 20 + 2 + 2, lines
    assert steps(folder / "checkpoints")[-1] == first[-1] and damage(folder / "checkpoints", first[-1]) is None


@pytest.mark.slow  # a distributed run of ~1 minute
def test_a_full_disk_ends_a_distributed_trial_once_without_restarts(small_disk: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-f", "full",
                             f"log.run_root={small_disk}", "total_env_steps=300000", "checkpoint.every_updates=2",
                             "log.wandb=disabled", "compile_cache=off"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    metrics = small_disk / "cartpole_ppo_distributed" / "full" / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 4:
            break
        time.sleep(0.5)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler").write_bytes(b"\0" * free)  # the disk is full from here on
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 1, out[-3000:]
    assert "restarting worker" not in out, out[-3000:]  # the environment's fault: no restart spent on it
    failed = [line for line in out.splitlines() if line.startswith("FAILED:")]  # the message, the summary
    assert failed[0].startswith("FAILED: worker trainer/0") and "not restarted: the disk is full" in out, out[-3000:]
    assert failed[-1].startswith("FAILED: error,"), out[-3000:]


def test_a_resume_that_restores_nothing_keeps_the_trials_config(tmp_path: Path) -> None:
    from srljax.storage.checkpoint import CheckpointError

    cfg, folder = trained(tmp_path, "none")
    for step in (3, 4, 5):  # every step's array data cut; its JSON files read
        for f in (folder / "checkpoints" / str(step) / "state").rglob("*"):
            if f.is_file() and "/d/" in str(f) and f.stat().st_size > 200:
                os.truncate(f, 100)
    before = (folder / "config.json").read_bytes()
    with pytest.raises(CheckpointError, match="cannot restore checkpoint step 3"):
        train(dataclasses.replace(cfg, total_env_steps=4 * 4 * 7), resume=True)
    assert (folder / "config.json").read_bytes() == before and not list(folder.glob("config.*.json"))


def test_a_config_file_that_exits_is_an_error_not_a_finished_run(tmp_path: Path) -> None:
    config = tmp_path / "exits.py"
    config.write_text("import sys\nfrom srljax.config import Experiment\n\n\ndef experiment():\n    sys.exit(0)\n")
    out = subprocess.run([sys.executable, "-m", "launch.local", str(config), f"log.run_root={tmp_path}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "called sys.exit(0)" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "exits").exists()


def test_a_fixed_prometheus_port_in_use_is_refused_before_the_folder_exists(tmp_path: Path) -> None:
    import socket

    from srljax.comm.hosts import bind_host
    from srljax.prepare import problems

    with socket.socket() as taken:
        taken.bind((bind_host(), 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = dataclasses.replace(parity(tmp_path), log=LogConfig(run_root=str(tmp_path), prometheus_port=port))
        found = problems(cfg)
        assert len(found) == 1 and found[0].startswith(f"log.prometheus_port={port}: cannot listen") \
            and "log.prometheus_port=0" in found[0], found
    assert problems(cfg) == []  # free again
    assert not Path(cfg.run_dir).exists()


def test_workers_raise_their_soft_fd_limit_to_the_hard_one() -> None:
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (512, 1024))\n"
            "from srljax.system.shell.fd_limits import raise_to_hard\n"
            "print(raise_to_hard(), resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split("\n")[0] == "1024 (1024, 1024)", out.stdout + out.stderr


def test_resume_from_a_chosen_step_keeps_the_later_ones_aside(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg, folder = trained(tmp_path, "from")
    capsys.readouterr()
    result = train(dataclasses.replace(cfg, total_env_steps=4 * 4 * 7), resume=4)  # --resume-from 4
    out = capsys.readouterr().out
    assert "resuming from checkpoint step 4 as asked: moved the later steps 5" in out, out
    assert "moved 1 line(s) of update 5" in out, out
    assert updates(folder) == [1, 2, 3, 4, 5, 6, 7] and result.metrics[0]["update"] == 5
    assert (folder / run_dir.LATER / "5" / "state").is_dir()  # kept, not deleted
    assert steps(folder / "checkpoints")[-1] == 7


CONFIG_FILE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.test_trial_faults import parity
from pathlib import Path

def experiment():
    return parity(Path(__file__).parent)
"""


def test_resume_from_a_step_that_is_not_there_names_the_ones_that_are(tmp_path: Path) -> None:
    from launch.cli import run_cli

    cfg, folder = trained(tmp_path, "t")
    (tmp_path / "cfg.py").write_text(CONFIG_FILE)
    called = []
    for step, said in [("9", "holds no step 9; the intact steps there: 3, 4, 5; resume from one of them"),
                       ("-1", "--resume-from -1: a checkpoint step is an update number >= 0")]:
        before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        code = run_cli(lambda c, resume: called.append(resume) or 0,
                       [str(tmp_path / "cfg.py"), "-f", "t", "--resume-from", step, "total_env_steps=200"],
                       "launch.local", "")
        assert code == 2 and not called
        assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before  # nothing changed
    assert run_dir.resume_problems(cfg, 9)[0].endswith(
        "holds no step 9; the intact steps there: 3, 4, 5; resume from one of them with --resume-from STEP, or "
        "from the newest with --resume")
    for f in (folder / "checkpoints" / "4").rglob("*"):
        if f.is_file() and f.stat().st_size > 200:
            os.truncate(f, 100)
    problem = run_dir.resume_problems(cfg, 4)[0]
    assert "from checkpoint step 4: it is damaged" in problem and "intact steps there: 3, 5 (damaged: 4)" in problem
    code = run_cli(lambda c, resume: called.append(resume) or 0,
                   [str(tmp_path / "cfg.py"), "-f", "t", "--resume-from", "3", "total_env_steps=200"],
                   "launch.local", "")
    assert code == 0 and called == [3]


def test_a_launcher_that_inherits_sigint_ignored_takes_ctrl_c_back(tmp_path: Path) -> None:
    """A script's ``python -m launch.local ... &`` starts with SIGINT ignored; ``kill -INT`` must still stop it."""
    from launch.cli import run_cli

    (tmp_path / "cfg.py").write_text(CONFIG_FILE)
    seen = []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = run_cli(lambda c, resume: seen.append(signal.getsignal(signal.SIGINT)) or 0,
                       [str(tmp_path / "cfg.py"), "-f", "t"], "launch.local", "")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 0 and seen == [signal.default_int_handler]


def test_a_worker_lost_on_a_full_disk_is_not_restarted_even_without_its_error(tmp_path: Path, monkeypatch) -> None:
    """A worker that died writing its own error to a full disk leaves only an exit code: the disk is looked at."""
    from srljax.system.shell import controller

    assert controller.environment_fault("its process exited with code 1", tmp_path) is None  # room left: restart
    assert "the disk is full" in controller.environment_fault("OSError: [Errno 28] No space left on device", tmp_path)
    full = os.statvfs_result((4096, 4096, 1000, 0, 0, 100, 0, 0, 0, 255))
    monkeypatch.setattr(controller.os, "statvfs", lambda path: full)
    fault = controller.environment_fault("its process exited with code 1", tmp_path)
    assert fault is not None and f"the disk under {tmp_path} is full (0 KiB free)" in fault and "--resume" in fault
