"""``python -m launch.play RUN_DIR``: a trial's checkpoints played back, the best one reproducing its recorded score."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # ~2 minutes; the default run plays a best checkpoint back in tests/test_notebook.py
def test_play_the_best_and_the_latest_checkpoint_of_a_trial(tmp_path):
    out = sh("launch.local", "configs/cartpole_ppo.py", "-e", "play", "-f", "t", f"log.run_root={tmp_path}",
             "log.wandb=disabled", "total_env_steps=20480", "eval.every_updates=5", "eval.episodes=4")
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = tmp_path / "play" / "t"
    evals = [json.loads(x) for x in (run_dir / "eval.jsonl").read_text().splitlines()]
    best = max(evals, key=lambda e: e["mean"])  # the first of the best, as EvalBook keeps it
    best = next(e for e in evals if e["mean"] == best["mean"])

    played = sh("launch.play", str(run_dir))
    assert played.returncode == 0, played.stderr[-3000:]
    assert f"version {best['version']} (best), 4 episodes" in played.stdout, played.stdout
    returns = [float(x) for x in re.search(r"returns: (.+)", played.stdout).group(1).split()]
    assert returns == best["returns"] and "-> reproduced" in played.stdout, (played.stdout, best)

    latest = sh("launch.play", str(run_dir), "--checkpoint", "latest", "--episodes", "2", "--sampled")
    assert latest.returncode == 0, latest.stderr[-3000:]
    assert "version 20 (latest), 2 episodes" in latest.stdout and "sampled actions" in latest.stdout, latest.stdout

    missing = sh("launch.play", str(run_dir), "--checkpoint", "7")
    assert missing.returncode == 2 and "--checkpoint 7: no such checkpoint; the run has 20" in missing.stderr, missing.stderr
    wrong = sh("launch.play", str(tmp_path / "play"))
    assert wrong.returncode == 2 and "give the trial's run folder" in wrong.stderr, wrong.stderr
