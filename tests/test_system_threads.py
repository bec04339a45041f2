"""The whole worker graph in threads (``run_threads``): CartPole PPO, remote and inline inference."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from srljax.config import Experiment, apply_overrides, load_file
from srljax.system import ActorWorker, run_threads

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo_distributed.py"


def small_config(tmp_path: Path, *overrides: str, trial: str = "t0") -> Experiment:
    """CartPole, 2 actors x 4 envs, T=32: a few seconds per update on a loaded 2-core box."""
    cfg = load_file(CONFIG)
    return apply_overrides(cfg, [
        f"trial={trial}", f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines",
        "algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=1",
        f"total_env_steps={2 * 4 * 32 * 6}", "layout.ring_size=2", *overrides,
    ])


def check_finished(result, cfg: Experiment) -> None:
    assert result.exit_code == 0, result.message
    assert result.reason == "done"
    last = result.metrics[-1]
    assert last["update"] == cfg.num_updates
    assert last["env_steps"] >= cfg.num_updates * cfg.env_steps_per_update
    for key in ("loss", "policy_loss", "value_loss", "entropy"):
        assert math.isfinite(last[key]), (key, last)
    assert "episode_return" in last and last["episode_return"] > 0
    assert "lag/mean" in last


def test_remote_inference_graph_in_threads(tmp_path):
    cfg = small_config(tmp_path)
    result = run_threads(cfg)
    check_finished(result, cfg)
    assert set(result.pids) == {"trainer/0", "policy/0", "actor/0", "actor/1"}

    actor = result.worker_metrics("actor", 0)[-1]
    assert actor["role"] == "actor" and actor["pid"] == result.pids["actor/0"] and actor["state"] == "stopped"
    assert actor["requests"] > 0 and actor["segments"] > 0
    assert actor["latency/inference_ms/p99"] >= actor["latency/inference_ms/p50"] > 0
    assert 0 <= actor["time/wait/inference"] <= 1.5  # a share of wall time
    policy = result.worker_metrics("policy", 0)[-1]
    assert policy["batches"] > 0 and policy["rows"] >= policy["requests"] > 0
    assert 0 < policy["batch/fill/mean"] <= 1
    trainer = result.worker_metrics("trainer", 0)[-1]
    assert trainer["updates"] == cfg.num_updates
    assert sum(trainer["lag/received"].values()) == trainer["samples"]
    assert (Path(cfg.run_dir) / "checkpoints").is_dir()


def test_inline_inference_with_a_buffer_in_threads(tmp_path):
    cfg = small_config(tmp_path, "layout.inference=inline", "layout.num_buffer_workers=1")
    result = run_threads(cfg)
    check_finished(result, cfg)
    assert set(result.pids) == {"trainer/0", "buffer/0", "actor/0", "actor/1"}  # no policy worker
    assert result.worker_metrics("actor", 1)[-1]["env_steps"] > 0
    assert result.worker_metrics("buffer", 0)[-1]["segments"] > 0


def test_a_failing_worker_ends_the_trial_naming_it(tmp_path, monkeypatch):
    def broken(self):
        if self.index == 1:
            raise RuntimeError("env exploded")
        return original(self)

    original = ActorWorker.poll
    monkeypatch.setattr(ActorWorker, "poll", broken)
    cfg = small_config(tmp_path)
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "error"
    assert "worker actor/1" in result.message and "env exploded" in result.message


@pytest.mark.slow
def test_cartpole_learns_in_threads(tmp_path):
    cfg = apply_overrides(load_file(CONFIG), [f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines"])
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    returns = [m.get("episode_return", 0) for m in result.metrics]
    assert max(returns) >= 475  # reaches the cap region, as the acceptance asks
    # Runs are not bit-reproducible (batches depend on timing) and CartPole PPO sometimes sags
    # after holding 500 (bench/RESULTS.md); a broken learner stays near 20-100.
    assert returns[-1] >= 250, returns[-10:]
