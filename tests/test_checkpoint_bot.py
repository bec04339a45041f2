"""A trained self-play run as a bot (``ckpt:RUN_DIR``, ``srljax/selfplay/checkpoint_bot.py``) and ``launch.play
--bots``: one short tic-tac-toe self-play run, then its policy plays as the bot and as the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from envs.openspiel import load_game
from srljax.config import EnvConfig, Experiment, to_dict
from srljax.selfplay.bots import play_bots
from srljax.selfplay.checkpoint_bot import bot_problems

ROOT = Path(__file__).resolve().parents[1]
GAMES = 60


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """30k env steps of tic-tac-toe self-play (20 s of CPU; 2 min on the busy 2-core box), its final evaluation against
    the random bot (95% wins here)."""
    root = tmp_path_factory.mktemp("ckpt_bot")
    out = subprocess.run(
        [sys.executable, "-m", "launch.local", "configs/connect_four_selfplay.py", "-f", "ttt",
         "total_env_steps=30000", "env.options.game=tic_tac_toe", "env.num_envs=16", "trainer.lr=1e-3",
         "trainer.anneal_lr=false", "algo.ent_coef=0.01", "selfplay.bot_every_updates=0", "selfplay.bots=[random]",
         f"selfplay.bot_games={GAMES}", "log.wandb=disabled", "log.progress=lines", f"log.run_root={root}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return root / "connect_four_selfplay" / "ttt"


def random_learner(seed: int):
    rng = np.random.default_rng(seed)
    return lambda obs: np.array([rng.choice(np.flatnonzero(obs[0, -9:] > 0.5))])


def first_legal(obs: np.ndarray) -> np.ndarray:
    return np.array([int(np.flatnonzero(obs[0, -9:] > 0.5)[0])])


def test_the_trained_policy_as_a_bot_beats_random_more_than_random_does(run):
    game = load_game("tic_tac_toe")
    (vs_ckpt,) = play_bots(game, random_learner(1), (f"ckpt:{run}",), games=GAMES, seed=5)
    (vs_random,) = play_bots(game, random_learner(1), ("random",), games=GAMES, seed=5)
    # the bot raises on an illegal move; a random player loses ~29-44% of its games to another random one
    assert vs_ckpt["loss_rate"] > vs_random["loss_rate"] + 0.2, (vs_ckpt, vs_random)  # 0.9 vs 0.48 here
    step = sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit())[-1]
    (greedy,) = play_bots(game, first_legal, (f"ckpt:{run}/checkpoints/{step}",), games=20, seed=5)
    (sampled,) = play_bots(game, first_legal, (f"ckpt-sampled:{run}",), games=20, seed=5)
    assert greedy["distinct_games"] == 2 and sampled["distinct_games"] > 2, (greedy, sampled)  # one game per seat


def test_launch_play_bots_reproduces_the_runs_own_evaluation_and_plays_the_checkpoint(run, tmp_path):
    (recorded,) = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    out = subprocess.run([sys.executable, "-m", "launch.play", str(run), "--bots", "random", f"ckpt:{run}",
                          "--games", str(GAMES), "--out", str(tmp_path / "rows.jsonl")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["opponent"] for r in rows] == ["random", f"ckpt:{run}"]
    for key in ("win_rate", "draw_rate", "loss_rate"):  # the same params, seeds and seats: the same games
        assert rows[0][key] == recorded[key], (rows[0], recorded)
    assert rows[1]["distinct_games"] == 2  # greedy against itself: one game per seat, repeated


def test_a_ckpt_bot_that_cannot_play_is_refused_with_its_fix(run, tmp_path):
    assert bot_problems(("random", "mcts100", f"ckpt:{run}"), "tic_tac_toe") == []
    (wrong_game,) = bot_problems((f"ckpt:{run}",), "connect_four")
    assert "played tic_tac_toe, this evaluation plays connect_four" in wrong_game
    (missing,) = bot_problems((f"ckpt:{tmp_path / 'nothing'}",), "tic_tac_toe")
    assert "config.json does not exist" in missing and "configs/connect_four_selfplay.py" in missing
    other = tmp_path / "cartpole"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(to_dict(Experiment(env=EnvConfig(id="CartPole-v1")))))
    (not_a_game,) = bot_problems((f"ckpt:{other}",), "tic_tac_toe")
    assert "CartPole-v1, not on an OpenSpiel game" in not_a_game
    (no_step,) = bot_problems((f"ckpt:{run}/checkpoints/7",), "tic_tac_toe")
    assert "no checkpoint step 7" in no_step
    (bad,) = bot_problems(("mcts", "alphabeta"), "tic_tac_toe")
    assert "['mcts', 'alphabeta']" in bad
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/connect_four_selfplay.py", "--show",
                          f"selfplay.bots=[ckpt:{other}]"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n  - ") == 1 and "not on an OpenSpiel game" in out.stderr, \
        out.stderr


@pytest.mark.slow  # a short AlphaZero run (~4 min of CPU on a loaded 2-core box)
def test_alphazero_evaluates_against_the_checkpoint_and_refuses_one_of_another_game(run, tmp_path):
    """A few updates of AlphaZero on pgx's tic-tac-toe, its evaluation against the self-play run's policy: legal games
    (the bot raises on an illegal move), one per seat (both sides greedy); a connect-four AlphaZero is refused it."""
    pytest.importorskip("pgx")
    pytest.importorskip("mctx")
    import dataclasses

    from srljax.config import AlphaZeroConfig, ConfigError, EvalConfig, LogConfig, SelfPlayConfig, TrainerConfig
    from srljax.loops.train import train
    from srljax.prepare import check

    cfg = Experiment(name="az", trial="t", total_env_steps=16 * 8 * 2, env=EnvConfig(id="pgx/tic_tac_toe", num_envs=16),
                     algo=AlphaZeroConfig(num_steps=8, num_simulations=8, eval_simulations=8, hidden_sizes=(32,)),
                     trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=2, update_epochs=1),
                     selfplay=SelfPlayConfig(bots=(f"ckpt:{run}",), bot_games=6), eval=EvalConfig(final=True),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    train(cfg)
    (row,) = [json.loads(x) for x in (tmp_path / "az" / "t" / "eval.jsonl").read_text().splitlines()]
    assert row["opponent"] == f"ckpt:{run}" and row["games"] == 6 and row["distinct_games"] == 2, row
    four = dataclasses.replace(cfg, trial="c4", env=EnvConfig(id="pgx/connect_four", num_envs=16))
    with pytest.raises(ConfigError, match="played tic_tac_toe, this evaluation plays connect_four"):
        check(four)
