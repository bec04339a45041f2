"""The whole worker graph in threads (``run_threads``): CartPole PPO, remote and inline inference."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from launch.threads import run_threads
from srljax.config import Experiment, apply_overrides, load_file
from srljax.system import ActorWorker

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo_distributed.py"
PARAMS_NORM_CONFIG = CONFIG.with_name("cartpole_ppo_params_norm.py")  # a user-defined role: params_norm


def small_config(tmp_path: Path, *overrides: str, trial: str = "t0", config: Path = CONFIG) -> Experiment:
    """CartPole, 2 actors x 4 envs, T=32: a few seconds per update on a loaded 2-core box."""
    cfg = load_file(config)
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
    # a deterministic failure: restarted layout.max_restarts=3 times (tests/test_system_restart.py), then the end
    assert result.restarts["by_worker"] == {"actor/1": 3}, result.restarts


def test_three_buffers_for_one_batch_complete(tmp_path):
    """The former deadlock: 3 buffers share the segments of 2 actors x 4 envs, so no buffer alone
    ever sees a batch of 8 columns; they must forward what they hold and let the trainer assemble."""
    cfg = small_config(tmp_path, "layout.inference=inline", "layout.num_buffer_workers=3", "trainer.batch_envs=8",
                       f"total_env_steps={8 * 32 * 3}", "layout.stall_seconds=60")
    result = run_threads(cfg)
    check_finished(result, cfg)
    assert set(result.pids) == {"trainer/0", "buffer/0", "buffer/1", "buffer/2", "actor/0", "actor/1"}
    assert result.worker_metrics("trainer", 0)[-1]["updates"] == cfg.num_updates == 3
    forwarded = [result.worker_metrics("buffer", i)[-1]["segments"] for i in range(3)]
    assert sum(1 for n in forwarded if n > 0) >= 2, forwarded  # the segments really were split over buffers


def test_the_batch_does_not_depend_on_actors_and_envs(tmp_path):
    """``trainer.batch_envs`` alone sets the batch: 4 actors x 2 envs and 2 actors x 4 envs train
    on the same number of env steps per update, hence the same number of updates."""
    four_by_two = small_config(tmp_path, "layout.num_actors=4", "env.num_envs=2", "trainer.batch_envs=8")
    two_by_four = small_config(tmp_path, "layout.num_actors=2", "env.num_envs=4", "trainer.batch_envs=8")
    assert four_by_two.env_steps_per_update == two_by_four.env_steps_per_update == 8 * 32
    assert four_by_two.num_updates == two_by_four.num_updates == 6
    assert small_config(tmp_path, "trainer.batch_envs=16").env_steps_per_update == 16 * 32  # and it is the knob


@pytest.mark.parametrize("actors,envs", [(4, 2), (4, 4)])
def test_batches_of_columns_from_several_actors(tmp_path, monkeypatch, actors, envs):
    """4 actors x 2 envs (4 segments to a batch) and 4 actors x 4 envs (half the envs of a batch's
    worth): each update trains on exactly ``batch_envs`` columns taken from several actors."""
    from srljax.system.training.sources import SegmentSource

    taken: list[int] = []  # the actor of each segment (env.num_envs columns), in the order the trainer took them
    original = SegmentSource.take

    def take(self, msg):
        taken.append(int(msg.meta["actor"]))
        return original(self, msg)

    monkeypatch.setattr(SegmentSource, "take", take)
    # one segment ahead per actor: the first batch can only be filled by different actors
    cfg = small_config(tmp_path, "layout.inference=inline", f"layout.num_actors={actors}", f"env.num_envs={envs}",
                       "layout.ring_size=1", "trainer.batch_envs=8", "layout.max_segments_ahead=1",
                       f"total_env_steps={8 * 32 * 3}", "layout.stall_seconds=60")
    result = run_threads(cfg)
    check_finished(result, cfg)
    trainer = result.worker_metrics("trainer", 0)[-1]
    assert trainer["updates"] == cfg.num_updates == 3
    assert result.metrics[-1]["env_steps"] == trainer["env_steps"] >= 3 * 8 * 32
    assert set(taken) == set(range(actors)), taken  # every actor's columns reached the trainer
    first_batch = set(taken[:8 // envs])
    assert len(first_batch) == 8 // envs, taken  # the first batch mixes columns of 8 / envs actors


def test_a_custom_role_runs_as_a_thread(tmp_path):
    """``configs/cartpole_ppo_params_norm.py``: a user-defined ``params_norm`` worker beside the built-in ones."""
    cfg = small_config(tmp_path, "layout.inference=inline", f"total_env_steps={8 * 32 * 3}", config=PARAMS_NORM_CONFIG)
    assert cfg.layout.custom_roles == ("configs.cartpole_ppo_params_norm:ParamsNormLogger",)
    result = run_threads(cfg)
    check_finished(result, cfg)
    assert set(result.pids) == {"trainer/0", "actor/0", "actor/1", "params_norm/0"}
    check_params_norms(Path(cfg.run_dir), cfg.num_updates)
    last = result.worker_metrics("params_norm", 0)[-1]
    assert last["role"] == "params_norm" and last["state"] == "stopped" and last["versions"] >= 2


def check_params_norms(run_dir: Path, num_updates: int) -> None:
    """``params_norms.jsonl``: one line per params version received, versions increasing, norms finite and > 0."""
    lines = [json.loads(line) for line in (run_dir / "params_norms.jsonl").read_text().splitlines()]
    versions = [line["version"] for line in lines]
    assert len(versions) >= 2 and versions == sorted(set(versions)), versions
    assert versions[0] >= 0 and versions[-1] <= num_updates
    assert all(math.isfinite(line["norm"]) and line["norm"] > 0 for line in lines), lines
    assert len({line["norm"] for line in lines}) == len(lines)  # every update moved the params


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
