"""Evaluation (issue 15 part 1): fixed-seed deterministic episodes, eval.jsonl, the best checkpoint, the eval role."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

import algos
import envs
from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, apply_overrides, load_file, problems
from srljax.config.eval import EvalConfig
from srljax.evaluation.evaluator import EvalBook, Evaluator, load_best, read_evals
from srljax.layout import EVAL, PARAMS, TRAINER, Stream, build_layout

ROOT = Path(__file__).resolve().parents[1]


def cartpole(tmp_path: Path, **eval_fields) -> Experiment:
    return Experiment(name="ev", trial="t", env=EnvConfig(id="CartPole-v1", num_envs=4), algo=PPOConfig(num_steps=16),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled", progress="lines"),
                      eval=EvalConfig(every_updates=1, **eval_fields))


@pytest.fixture(scope="module")
def cartpole_algo():
    """CartPole PPO built once for the module: (algo, params of init seed 0, params of init seed 1)."""
    cfg = Experiment(env=EnvConfig(id="CartPole-v1", num_envs=4), algo=PPOConfig(num_steps=16))
    algo = algos.make(cfg, envs.make(cfg.env, 0).spec)
    init = jax.jit(algo.init)
    return algo, algo.policy_params(init(jax.random.PRNGKey(0))), algo.policy_params(init(jax.random.PRNGKey(1)))


def test_same_params_same_episodes_and_each_env_plays_its_share(tmp_path, cartpole_algo):
    algo, params, _ = cartpole_algo
    cfg = cartpole(tmp_path, episodes=5, num_envs=2, deterministic=False)
    evaluator = Evaluator(cfg, algo)
    first, second = evaluator.evaluate(params, 3), evaluator.evaluate(params, 3)
    assert len(first.returns) == 5 and first.version == 3
    assert first.returns == second.returns and first.lengths == second.lengths  # fixed env seed and act key
    # a sampling policy on another seed plays other episodes: the seed is what makes them repeat
    evaluator.cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, seed=7))
    assert evaluator.evaluate(params, 3).returns != first.returns


def test_deterministic_act_is_the_mode(cartpole_algo):
    algo, params, _ = cartpole_algo
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    greedy = [np.asarray(algo.act_deterministic(params, obs, (), None, jax.random.PRNGKey(i))[0]) for i in range(3)]
    assert all((g == greedy[0]).all() for g in greedy)  # no randomness left
    logp = np.asarray(algo.act_deterministic(params, obs, (), None, jax.random.PRNGKey(0))[1]["logp"])
    assert (logp >= np.log(0.5) - 1e-6).all()  # of two actions, the greedy one has probability >= 1/2
    sampled = np.asarray(algo.act(params, obs, (), None, jax.random.PRNGKey(0))[0])
    assert (sampled != greedy[0]).any()  # near-uniform initial policy: sampling differs somewhere in 64 rows


def test_book_keeps_the_best_version_and_it_restores(tmp_path, cartpole_algo):
    algo, params_a, params_b = cartpole_algo
    cfg = cartpole(tmp_path, episodes=3)
    from srljax.evaluation.evaluator import EvalResult

    book = EvalBook(cfg)
    book.add(EvalResult(1, [10.0, 12.0, 14.0], [10, 12, 14]), params_a)
    book.add(EvalResult(2, [30.0, 31.0, 32.0], [30, 31, 32]), params_b)  # the best
    book.add(EvalResult(3, [5.0, 5.0, 5.0], [5, 5, 5]), params_a)
    book.close()
    lines = read_evals(cfg.run_dir)
    assert [x["version"] for x in lines] == [1, 2, 3] and [x.get("best", False) for x in lines] == [True, True, False]
    assert lines[1]["mean"] == 31.0 and lines[1]["median"] == 31.0 and lines[1]["min"] == 30.0
    params, meta = load_best(cfg.run_dir, algo)
    assert meta["version"] == 2 and meta["mean"] == 31.0
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(params_b)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert EvalBook(cfg).best["version"] == 2  # a restarted manager keeps the earlier best


def test_due_every_n_versions(tmp_path):
    book = EvalBook(cartpole(tmp_path))
    book.cfg = dataclasses.replace(book.cfg, eval=EvalConfig(every_updates=3))
    evaluated = []
    for v in range(1, 10):
        if book.due(v):
            evaluated.append(v)
            book.last_version = v
    assert evaluated == [3, 6, 9]
    book.last_version = 4  # version 3 skipped while busy, 4 evaluated: the next due is at 6, not 4 + 3
    assert not book.due(5) and book.due(6)
    book.close()


def test_eval_role_and_stream_in_the_graph_and_bad_keys():
    cfg = load_file(ROOT / "configs" / "cartpole_ppo_eval_distributed.py")
    layout = build_layout(cfg)
    assert layout.count(EVAL) == 1 and Stream(PARAMS, TRAINER, EVAL) in layout.streams
    off = build_layout(apply_overrides(cfg, ["eval.every_updates=0"]))
    assert off.count(EVAL) == 0 and not off.outputs(TRAINER, PARAMS) == layout.outputs(TRAINER, PARAMS)
    found = problems(apply_overrides(cfg, ["eval.episodes=0", "eval.every_updates=-1"]))
    assert any("eval.episodes=0 must be >= 1" in p for p in found)
    assert any("eval.every_updates=-1" in p for p in found)


@pytest.mark.slow
def test_distributed_eval_worker_writes_versions_and_best_restores_to_its_score(tmp_path):
    from launch.threads import run_threads

    cfg = load_file(ROOT / "configs" / "cartpole_ppo_eval_distributed.py")
    cfg = apply_overrides(cfg, [f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines",
                                "algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=2",
                                f"total_env_steps={8 * 32 * 30}", "eval.every_updates=5", "eval.episodes=4"])
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    lines = read_evals(cfg.run_dir)
    versions = [x["version"] for x in lines]
    assert versions == sorted(set(versions)) and len(versions) >= 2 and versions[-1] == cfg.num_updates
    assert all(x["deterministic"] and len(x["returns"]) == 4 for x in lines)
    algo = algos.make(cfg, envs.make(cfg.env, 0).spec)
    params, meta = load_best(cfg.run_dir, algo)
    assert meta["mean"] == max(x["mean"] for x in lines)
    recorded = next(x for x in lines if x["version"] == meta["version"])
    evaluator = Evaluator(cfg, algo)
    again = evaluator.evaluate(params, meta["version"])
    assert again.returns == recorded["returns"]  # restores and evaluates to its recorded score
    assert evaluator.evaluate(params, meta["version"]).returns == again.returns
    assert result.worker_metrics(EVAL, 0)[-1]["evaluations"] >= 1


@pytest.mark.slow
def test_single_process_loop_evaluates_inline(tmp_path):
    from srljax.loops.train import train

    cfg = dataclasses.replace(cartpole(tmp_path, episodes=3), total_env_steps=4 * 16 * 6,
                              eval=EvalConfig(every_updates=2, episodes=3))
    train(cfg)
    lines = read_evals(cfg.run_dir)
    assert [x["version"] for x in lines] == [2, 4, 6]
    params, meta = load_best(cfg.run_dir, algos.make(cfg, envs.make(cfg.env, 0).spec))
    again = Evaluator(cfg, algos.make(cfg, envs.make(cfg.env, 0).spec)).evaluate(params, meta["version"])
    assert again.mean == meta["mean"]


def _gif_frames(path: Path) -> tuple[list[np.ndarray], int]:
    """The distinct frames of a GIF and how many frames it shows (Pillow merges a repeated frame into the
    previous one's duration: CartPole's first step can move less than a pixel)."""
    from PIL import Image, ImageSequence

    from srljax.evaluation.video import FPS

    with Image.open(path) as im:
        frames = [(np.asarray(frame.convert("RGB")), frame.info["duration"]) for frame in ImageSequence.Iterator(im)]
    return [f for f, _ in frames], sum(d for _, d in frames) // (1000 // FPS)


def test_eval_video_records_env_0s_first_episode_without_changing_the_evaluation(tmp_path, cartpole_algo):
    """``eval.video``: CartPole (envpool renders classic control) -> ``videos/version-<v>.gif`` of env 0's first
    episode, one frame after the reset and one per step; the returns are those of the same evaluation without it."""
    algo, params, _ = cartpole_algo
    cfg = cartpole(tmp_path, episodes=3, num_envs=2, deterministic=False)
    plain = Evaluator(cfg, algo).evaluate(params, 5)
    filmed_cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, video=True))
    filmed = Evaluator(filmed_cfg, algo).evaluate(params, 5)
    assert filmed.returns == plain.returns and filmed.lengths == plain.lengths
    assert filmed.video == "videos/version-5.gif" and filmed.video_note is None
    frames, shown = _gif_frames(Path(filmed_cfg.run_dir) / filmed.video)
    assert shown == filmed.lengths[0] + 1  # env 0's first episode (returns[0], lengths[0]): reset + every step
    assert frames[0].shape == (200, 300, 3)  # 600x400 subsampled by 2
    assert any(np.abs(f.astype(int) - frames[0]).sum() > 0 for f in frames[1:])  # the pole moves
    logged: list[dict] = []  # what goes to wandb (the loop's or the eval manager's run) when wandb is on
    book = EvalBook(dataclasses.replace(filmed_cfg, log=dataclasses.replace(filmed_cfg.log, wandb="offline")),
                    lambda values, step: logged.append(values))
    record = book.add(filmed, params)
    book.close()
    assert record["video"] == "videos/version-5.gif" and read_evals(filmed_cfg.run_dir)[-1]["video"] == record["video"]
    import wandb

    assert isinstance(logged[0]["eval/video"], wandb.Video) and logged[0]["eval/mean"] == record["mean"]


def test_eval_video_atari_frames_capped_and_mujoco_skipped_with_a_note(tmp_path):
    """Pong renders its 210x160 screen; ``eval.video_max_frames`` ends a long episode's video; MuJoCo is skipped with
    a note (decided from the task id: rendering it without an OpenGL context would end the process)."""
    from srljax.config import DQNConfig
    from srljax.evaluation.video import render_problem

    cfg = Experiment(name="ev", trial="pong", env=EnvConfig(id="Pong-v5", num_envs=1, max_episode_steps=40),
                     algo=DQNConfig(hidden_sizes=(8,)), log=LogConfig(run_root=str(tmp_path), wandb="disabled"),
                     eval=EvalConfig(every_updates=1, episodes=1, video=True, video_max_frames=12))
    algo = algos.make(cfg, envs.make(cfg.env, 0).spec)
    result = Evaluator(cfg, algo).evaluate(algo.policy_params(algo.init(jax.random.PRNGKey(0))), 1)
    frames, shown = _gif_frames(Path(cfg.run_dir) / result.video)
    assert result.lengths[0] > 12 and shown == 12 and len(frames) > 1 and frames[0].shape == (210, 160, 3)
    mujoco = dataclasses.replace(cfg, env=EnvConfig(id="HalfCheetah-v4"))
    assert "MuJoCo" in render_problem(mujoco) and render_problem(cfg) is None
    assert any("eval.video_max_frames=0" in p for p in problems(apply_overrides(cfg, ["eval.video_max_frames=0"])))
