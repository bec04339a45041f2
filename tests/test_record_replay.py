"""layout.record_samples and python -m launch.replay: what a trainer trained on, replayed offline bit for bit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from algos.testing import random_trajectory
from configs import cartpole_ppo_distributed
from launch.replay import main as replay_main
from srljax.config import apply_overrides
from srljax.config.experiment import problems
from srljax.storage.samples_record import SampleRecorder, read_batches, read_states, state_digest
from srljax.types import EnvSpec

ROOT = Path(__file__).resolve().parents[1]


def test_recorded_batches_and_states_read_back(tmp_path):
    spec = EnvSpec(id="x", obs_shape=(3,), obs_dtype="float32", action_kind="discrete", num_actions=2, num_envs=4,
                   batch_size=4)
    rec = SampleRecorder(tmp_path / "trainer-0")
    batches = [random_trajectory(spec, 5, 4, seed=i)._replace(policy_version=np.full(4, i, np.int32)) for i in range(3)]
    for version, batch in enumerate(batches):
        rec.batch(version, batch)
    state = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.int32(3)}
    digest = rec.state(1, state)
    (tmp_path / "trainer-0" / "states.jsonl").open("a").write('{"version": 2, "sha')  # a line a crash cut short
    back = list(read_batches(tmp_path / "trainer-0"))
    assert [v for v, _ in back] == [0, 1, 2]
    for (_, got), want in zip(back, batches):
        assert all(np.array_equal(a, b) for a, b in zip(got[:5], want[:5]))
        assert np.array_equal(got.policy_version, want.policy_version)
        assert set(got.extras) == set(want.extras) and np.array_equal(got.extras["value"], want.extras["value"])
    assert read_states(tmp_path / "trainer-0") == {1: digest}
    flipped = {"w": state["w"].copy(), "step": state["step"]}
    flipped["w"].view(np.uint32)[0, 0] ^= 1  # one bit
    assert state_digest(flipped) != digest
    assert state_digest({"w": state["w"].astype(np.float64), "step": state["step"]}) != digest  # dtype counts


def test_record_samples_is_refused_where_no_single_trainer_receives_segments():
    base = cartpole_ppo_distributed.experiment()
    single = apply_overrides(base, ["layout.mode=single", "layout.record_samples=true"])
    assert any("layout.record_samples=true needs layout.mode=distributed" in p for p in problems(single))
    hosts = apply_overrides(base, ["layout.record_samples=true", "trainer.num_hosts=2"])
    assert any("layout.record_samples=true needs trainer.num_hosts=1" in p for p in problems(hosts))
    assert problems(apply_overrides(base, ["layout.record_samples=true"])) == []


def test_replay_names_what_is_missing(tmp_path, capsys):
    assert replay_main([str(tmp_path)]) == 2
    assert "has no config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    assert replay_main([str(tmp_path)]) == 2
    assert "was not started with layout.record_samples=true" in capsys.readouterr().err


@pytest.mark.slow  # a distributed run and two replays: 7.7 minutes at load 25-50 on the 2-core box
def test_a_deterministic_run_replays_bit_for_bit_and_a_changed_batch_is_found(tmp_path):
    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-e", "rec", "-f", "a",
           f"log.run_root={tmp_path}", "log.wandb=disabled", "layout.deterministic=true", "layout.record_samples=true",
           "seed=3", "total_env_steps=8192", "checkpoint.final=false"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    run_dir = tmp_path / "rec" / "a"
    live = (run_dir / "logs" / "trainer-0.log").read_text()
    digest = live.split("train state sha256 after update 8: ")[1].split()[0]
    replayed = subprocess.run([sys.executable, "-m", "launch.replay", str(run_dir)], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"replay train state sha256 after update 8: {digest}" in replayed.stdout
    assert "identical" in replayed.stdout
    # the same recording with one reward of update 5's batch changed: the replay parts there, and says so
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    path = copy / "samples" / "trainer-0" / "batch-00000004.npz"
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["reward"] = arrays["reward"].copy()
    arrays["reward"][3, 0] += 1.0
    np.savez(path, **arrays)
    parted = subprocess.run([sys.executable, "-m", "launch.replay", str(copy)], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert parted.returncode == 1, parted.stdout + parted.stderr
    assert "they part at update 5" in parted.stdout
    assert json.loads((copy / "samples" / "trainer-0" / "states.jsonl").read_text().splitlines()[-1])["version"] == 8
