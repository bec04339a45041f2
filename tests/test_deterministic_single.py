"""The single-process loop is deterministic per seed: one seed on one tree writes one metrics.jsonl (time and speed
columns aside), for PPO and DQN, as launched by a user; another seed writes another."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# fields that measure the machine, not the run: wall clock, rates, and the per-phase timers (time_env, ...)
MACHINE = ("time", "sps")


def run(tmp_path: Path, config: str, trial: str, *extra: str) -> list[dict]:
    cmd = [sys.executable, "-m", "launch.local", config, "-e", "det", "-f", trial, f"log.run_root={tmp_path}",
           "checkpoint.final=false", *extra]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return [json.loads(x) for x in (tmp_path / "det" / trial / "metrics.jsonl").read_text().splitlines()]


def learning_columns(lines: list[dict]) -> list[dict]:
    return [{k: v for k, v in x.items() if k not in MACHINE and not k.startswith("time_") and not k.endswith("_sps")}
            for x in lines]


@pytest.mark.parametrize("config, budget", [
    ("configs/cartpole_ppo.py", ["total_env_steps=20480"]),
    ("configs/cartpole_dqn.py", ["total_env_steps=12000", "algo.learning_starts=2000"]),
])
def test_one_seed_writes_the_same_metrics_twice(tmp_path, config, budget):
    a = run(tmp_path, config, "a", "seed=7", *budget)
    b = run(tmp_path, config, "b", "seed=7", *budget)
    c = run(tmp_path, config, "c", "seed=8", *budget)
    assert len(a) == len(b) >= 2
    assert learning_columns(a) == learning_columns(b)
    # the columns compared carry the learning: losses move, and another seed gives other numbers
    losses = [x["loss"] for x in a if isinstance(x.get("loss"), float)]
    assert len(set(losses)) > 1
    assert learning_columns(c) != learning_columns(a)
