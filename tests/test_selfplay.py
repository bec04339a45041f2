"""Self-play: Elo and PFSP against their formulas, the OpenSpiel env, the bots, config refusals, and a short run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from envs.openspiel import OpenSpielVecEnv, load_game, observe, openspiel_problems, seat_planes
from srljax.config import apply_overrides, load_file, problems
from srljax.selfplay.bots import play_bots
from srljax.selfplay.elo import Elo, expected
from srljax.selfplay.pool import LATEST, OpponentPool

ROOT = Path(__file__).resolve().parents[1]


def test_elo_updates_match_hand_computed_values():
    elo = Elo(k=16.0)
    elo.update("a", "b", 1.0)  # 1200 vs 1200: expected 0.5 each
    assert elo.rating("a") == pytest.approx(1208.0) and elo.rating("b") == pytest.approx(1192.0)
    elo = Elo(k=32.0)
    elo.add("strong", 1400.0)
    elo.add("weak", 1200.0)
    assert expected(1400.0, 1200.0) == pytest.approx(1 / (1 + 10 ** (-0.5)))  # 0.7597
    elo.update("strong", "weak", 0.0)  # an upset
    assert elo.rating("strong") == pytest.approx(1400.0 - 32 * 0.759746, abs=1e-3)  # 1375.69
    assert elo.rating("weak") == pytest.approx(1200.0 + 32 * 0.759746, abs=1e-3)  # 1224.31
    elo.update("strong", "weak", 0.5)
    assert elo.rating("strong") + elo.rating("weak") == pytest.approx(2600.0)


def test_pfsp_samples_opponents_by_their_formula():
    pool = OpponentPool(max_size=3, sampling="pfsp", pfsp_power=2.0, latest_share=0.2)
    dropped = [s.name for v in (10, 20, 30, 40) for s in pool.add(v, {"v": v})]
    assert sorted(pool.snapshots) == ["v20", "v30", "v40"] and dropped == ["v10"]  # bounded: the oldest left
    for name, (wins, games) in {"v20": (9, 10), "v30": (5, 10), "v40": (2, 10)}.items():
        pool.record(name, 0.0)  # one loss on top of the prior (1 win, 2 games) ...
        pool.snapshots[name].wins, pool.snapshots[name].games = wins, games  # ... then set outright
    p = np.array([0.9, 0.5, 0.2])
    want = 0.8 * (1 - p) ** 2 / ((1 - p) ** 2).sum()
    weights = pool.weights()
    np.testing.assert_allclose([weights[n] for n in ("v20", "v30", "v40")], want)
    assert weights[LATEST] == pytest.approx(0.2)
    rng = np.random.default_rng(0)
    draws = [pool.sample(rng) for _ in range(20_000)]
    freq = np.array([draws.count(n) for n in ("v20", "v30", "v40", LATEST)]) / len(draws)
    np.testing.assert_allclose(freq, [*want, 0.2], atol=0.012)
    recency = OpponentPool(max_size=3, sampling="recency")
    for v in (1, 2, 3):
        recency.add(v, None)
    np.testing.assert_allclose(list(recency.weights().values()), [1 / 6, 2 / 6, 3 / 6])
    assert OpponentPool(max_size=2, sampling="latest").weights() == {LATEST: 1.0}


def test_openspiel_env_alternates_seats_masks_moves_and_scores_games():
    env = OpenSpielVecEnv("tic_tac_toe", num_envs=8, seed=0)
    s, e = env.spec.legal_actions
    ts, rng, seats, results = env.reset(), np.random.default_rng(0), [], []
    for _ in range(400):
        seats += env.seat.tolist()
        legal, over = ts.obs[:, s:e] > 0.5, ts.terminated
        assert np.array_equal(legal.any(axis=1), ~over)  # asked to move whenever its game goes on; none when over
        action = np.array([rng.choice(np.flatnonzero(f)) if f.any() else 0 for f in legal], np.int32)
        ts = env.step(action, ts.env_id)
        done = ts.terminated
        assert np.all(ts.reward[~done] == 0) and set(ts.reward[done].tolist()) <= {-1.0, 0.0, 1.0}
        results += ts.reward[done].tolist()
    assert 0.35 < np.mean(seats) < 0.65  # first and second seats alternate at random
    assert len(results) > 300 and np.mean(np.array(results) > 0) > 0.3  # random vs random: both sides win
    live = int(np.flatnonzero(~ts.terminated & (ts.obs[:, s:e] < 0.5).any(axis=1))[0])  # a game with a taken cell
    action = np.array([int(np.flatnonzero(f > 0.5)[0]) if f.any() else 0 for f in ts.obs[:, s:e]], np.int32)
    action[live] = int(np.flatnonzero(ts.obs[live, s:e] < 0.5)[0])
    with pytest.raises(ValueError, match="illegal"):
        env.step(action, ts.env_id)


def test_egocentric_boards_put_the_viewers_own_pieces_first():
    game = load_game("connect_four")
    state = game.new_initial_state()
    state.apply_action(3)  # player 0 in column 3
    state.apply_action(5)  # player 1 in column 5
    board = lambda obs: obs[:126].reshape(3, 6, 7)  # noqa: E731
    plain0, plain1 = observe(game, state, 0), observe(game, state, 1)
    ego0, ego1 = observe(game, state, 0, seat_planes(game)), observe(game, state, 1, seat_planes(game))
    assert np.array_equal(board(plain0), board(plain1))  # OpenSpiel's planes are the same from both seats
    np.testing.assert_array_equal(ego0, plain0)  # seat 0 sees them unchanged
    assert board(ego1)[0, 0, 5] == 1 and board(ego1)[1, 0, 3] == 1  # seat 1: its own piece in the first plane
    np.testing.assert_array_equal(board(ego1)[2], board(plain1)[2])  # the empty cells stay
    np.testing.assert_array_equal(ego1[126:], plain1[126:])  # seat and legal moves untouched
    env = OpenSpielVecEnv("connect_four", num_envs=4, seed=0, egocentric=True)
    ts = env.reset()
    board_of = ts.obs[:, :126].reshape(4, 3, 6, 7)
    for i in range(4):  # a first move made by the opponent shows in the second plane, whichever seat is ours
        assert board_of[i, 0].sum() == 0 and board_of[i, 1].sum() == (1 if env.seat[i] == 1 else 0)
    assert seat_planes(load_game("liars_dice")) is None
    (found,) = openspiel_problems({"game": "liars_dice", "egocentric": True})
    assert "drop the option" in found
    with pytest.raises(ValueError, match="nothing to swap"):
        OpenSpielVecEnv("liars_dice", num_envs=1, egocentric=True)


def test_games_that_are_not_two_player_zero_sum_are_refused():
    with pytest.raises(ValueError, match="1-player .* needs a two-player zero-sum game"):
        load_game("2048")
    with pytest.raises(ValueError, match="no such game"):
        load_game("connect_five_hundred")


def test_bots_rows_alternate_seats_and_repeat_exactly():
    game = load_game("tic_tac_toe")
    first_legal = lambda obs: np.array([int(np.flatnonzero(obs[0, -9:] > 0.5)[0])])  # noqa: E731
    rows = play_bots(game, first_legal, ("random", "mcts100"), games=20, seed=3)
    assert [r["opponent"] for r in rows] == ["random", "mcts100"]
    for r in rows:
        assert r["games"] == 20 and r["win_rate"] + r["draw_rate"] + r["loss_rate"] == pytest.approx(1.0)
    assert rows[1]["win_rate"] == 0.0 and rows[1]["loss_rate"] >= 0.8  # MCTS punishes "first empty cell"
    assert play_bots(game, first_legal, ("random", "mcts100"), games=20, seed=3) == rows  # fixed seeds


def launch(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launch.local", "configs/connect_four_selfplay.py", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_bad_selfplay_configs_exit_2_with_one_message():
    cfg = load_file(str(ROOT / "configs/connect_four_selfplay.py"))
    for overrides, text in ((["selfplay.pool_size=0"], "selfplay.pool_size=0 must be >= 1"),
                            (["env.factory=", "env.id=CartPole-v1"], "selfplay.enabled=true needs a two-player game")):
        (found,) = problems(apply_overrides(cfg, overrides))
        assert text in found, found
    out = launch("--show", "env.options.game=2048", timeout=120)  # found from the game, before launch
    assert out.returncode == 2 and "2048' is a 1-player general_sum game" in out.stderr, out.stderr
    assert out.stderr.count("\n  - ") == 1, out.stderr


def test_selfplay_run_learns_tic_tac_toe_writes_ratings_and_resumes(tmp_path):
    """Tic-tac-toe, 100k env steps in two launches (~40 s on 2 cores; the second ``--resume``s the first at 60k):
    the greedy policy beats the random bot in >= 58% of 100 games and loses <= 30% (a random player wins and loses
    ~44% of its games: 58% / 29% of its wins from the first / second seat; seeds 1 / 2 / 3 won 63% / 69% / 76% and
    lost 21% / 16% / 15% on an AVX-512 EPYC, seed 1 won 80% on the earlier box: XLA's code, and so the run, differs
    by CPU); the main agent's Elo rises over its snapshots; the
    resumed run plays on against the pool and ratings it left; the pool on disk stays within its size."""
    common = ["env.options.game=tic_tac_toe", "env.num_envs=16", "trainer.lr=1e-3", "trainer.anneal_lr=false",
              "algo.ent_coef=0.01", "env.options.egocentric=false", "selfplay.bot_every_updates=0",
              "selfplay.snapshot_every=10", "selfplay.pool_size=4", "selfplay.bots=[random]", "selfplay.bot_games=100",
              "checkpoint.every_updates=10", "log.wandb=disabled", "log.progress=lines", f"log.run_root={tmp_path}",
              "-f", "ttt"]
    first = launch("total_env_steps=60000", *common)
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "connect_four_selfplay" / "ttt"
    before = [json.loads(line) for line in (run / "ratings.jsonl").read_text().splitlines()]
    second = launch("total_env_steps=100000", "--resume", *common)
    assert second.returncode == 0, second.stderr[-3000:]
    ratings = [json.loads(line) for line in (run / "ratings.jsonl").read_text().splitlines()]
    after = ratings[len(before)]
    assert after["version"] > before[-1]["version"] and set(before[-1]["pool"]) & set(after["elo"]), after
    row = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()][-1]
    assert row["opponent"] == "random" and row["games"] == 100 and row["win_rate"] >= 0.58, row
    assert row["loss_rate"] <= 0.3, row
    assert ratings[-1]["elo_main"] > ratings[0]["elo_main"] + 50, [r["elo_main"] for r in ratings]
    assert len(list((run / "pool").glob("*.msgpack"))) <= 4 and (run / "ratings.png").exists()


def test_each_row_is_acted_by_its_own_opponent():
    import jax
    import jax.numpy as jnp

    from srljax.selfplay.opponents import act_stacked

    def act(params, obs, state, first, key):  # an "opponent" that always plays its own number
        return jnp.full(obs.shape[0], params["a"], jnp.int32), {}, state

    stacked = {"a": np.array([5, 7, 9], np.int32)}
    which = np.array([2, 0, 1, 0], np.int32)
    out = jax.jit(lambda s, o, w, k: act_stacked(act, s, o, w, k))(stacked, np.zeros((4, 3)), which,
                                                                    jax.random.PRNGKey(0))
    assert np.asarray(out).tolist() == [9, 5, 7, 5]
