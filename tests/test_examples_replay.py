"""The user-written replay algorithm of examples/expected_sarsa.py: its own target, run through the launchers by the
replay loop and by Ape-X's workers with no code of its own under srljax/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from algos.dqn import q_target
from examples.expected_sarsa import ExpectedSarsaConfig, expected_sarsa_target
from srljax.config import apply_overrides, from_dict, load_file, to_dict
from srljax.types import ReplayBatch

ROOT = Path(__file__).resolve().parents[1]


def one_step(reward, terminated) -> ReplayBatch:
    n = len(reward)
    return ReplayBatch(obs=None, action=None, reward=np.asarray(reward, np.float32)[:, None],
                       terminated=np.asarray(terminated)[:, None], truncated=np.zeros((n, 1), bool),
                       next_obs=None, weight=np.ones(n, np.float32))


def test_expected_sarsa_target_averages_over_the_epsilon_greedy_policy():
    q_next = jnp.asarray([[1.0, 3.0], [2.0, 0.0]])
    batch = one_step([1.0, 1.0], [False, True])
    greedy = q_target(q_next, None, batch, 0.9)
    np.testing.assert_allclose(expected_sarsa_target(0.0)(q_next, None, batch, 0.9), greedy, rtol=1e-6)
    # epsilon 0.5 over 2 actions: pi(greedy) = 0.75, so row 0 bootstraps from 0.75 * 3 + 0.25 * 1 = 2.5
    np.testing.assert_allclose(expected_sarsa_target(0.5)(q_next, None, batch, 0.9), [1.0 + 0.9 * 2.5, 1.0], rtol=1e-6)


def test_the_config_is_found_by_name_and_survives_the_json_round_trip():
    cfg = load_file(ROOT / "examples" / "cartpole_expected_sarsa.py")
    assert isinstance(cfg.algo, ExpectedSarsaConfig) and cfg.algo.consumes == "replay"
    back = from_dict(json.loads(json.dumps(to_dict(cfg))))  # what a distributed worker receives
    assert back == cfg
    picked = apply_overrides(cfg, ["algo=examples.expected_sarsa:ExpectedSarsaConfig", "algo.target_epsilon=0.2"])
    assert isinstance(picked.algo, ExpectedSarsaConfig) and picked.algo.target_epsilon == 0.2


def test_expected_sarsa_learns_cartpole_through_launch_local(tmp_path):
    """40k env steps (~20 s): a random policy scores ~22; seed 1 passes 300 (the replay loop, the seam's exploration)."""
    out = subprocess.run([sys.executable, "-m", "launch.local", "examples/cartpole_expected_sarsa.py", "-f", "learn",
                          "total_env_steps=40000", "log.log_every=100", f"log.run_root={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    run = tmp_path / "cartpole_expected_sarsa" / "learn"
    assert json.loads((run / "config.json").read_text())["algo"]["name"] == ExpectedSarsaConfig.name
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["env_steps"] >= 40_000 and 0.05 <= lines[-1]["epsilon"] < 0.2  # the seam's schedule, annealed
    assert max(x.get("episode_return", 0.0) for x in lines[-10:]) >= 150, [x.get("episode_return") for x in lines[-10:]]


@pytest.mark.slow
def test_expected_sarsa_runs_as_apex_with_no_code_of_its_own(tmp_path):
    """Ape-X's actors, replay buffer worker and trainer run the user's algorithm (~100 s): each actor acts with the
    seam's per-actor exploration, the trainer reaches the run's updates."""
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_apex_distributed.py", "-f", "apex",
                          "algo=examples.expected_sarsa:ExpectedSarsaConfig", "algo.learning_starts=2000",
                          "algo.replay.capacity=10000", "algo.replay.alpha=0.6", "algo.num_steps=16",
                          "total_env_steps=12000", "eval.every_updates=0", f"log.run_root={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    last = json.loads((tmp_path / "cartpole_apex_distributed" / "apex" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["update"] > 1000 and last["epsilon/actor_0"] == pytest.approx(0.4) and last["epsilon/actor_1"] < 0.01
