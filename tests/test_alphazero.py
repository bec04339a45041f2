"""AlphaZero on pgx games through the Anakin path: the pgx family against OpenSpiel's rules, the search's model and
signs, the value targets, the searched rows, a short run end to end with its bot evaluation, exact resume."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from srljax.config import (
    AlphaZeroConfig,
    CheckpointConfig,
    ConfigError,
    EnvConfig,
    EvalConfig,
    Experiment,
    LogConfig,
    PPOConfig,
    SelfPlayConfig,
    TrainerConfig,
)
from srljax.layout import plan_of
from srljax.loops.train import train
from srljax.prepare import check

pytest.importorskip("pgx")
pytest.importorskip("mctx")

from algos import make as make_algo  # noqa: E402
from envs import jax_envs  # noqa: E402
from srljax.learning.anakin_search import SearchProgram, env_model, value_targets  # noqa: E402


def _cfg(tmp_path, **kw) -> Experiment:
    base = Experiment(name="az", trial="t", total_env_steps=16 * 8 * 4, env=EnvConfig(id="pgx/connect_four", num_envs=16),
                      algo=AlphaZeroConfig(num_steps=8, num_simulations=8, eval_simulations=8, hidden_sizes=(32,)),
                      trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=2, update_epochs=1),
                      selfplay=SelfPlayConfig(bots=()), log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    return dataclasses.replace(base, **kw)


def test_pgx_connect_four_plays_by_openspiels_rules():
    pyspiel = pytest.importorskip("pyspiel")
    env = jax_envs.make(EnvConfig(id="pgx/connect_four", num_envs=1))
    fam, game = env.family, pyspiel.load_game("connect_four")
    reset, step = jax.jit(fam.reset), jax.jit(fam.step)
    lo, hi = env.spec.legal_actions
    rng = np.random.default_rng(0)
    outcomes = set()
    for g in range(25):
        obs, inner = reset(jax.random.PRNGKey(g))
        state, last_reward = game.new_initial_state(), 0.0
        while not state.is_terminal():
            assert list(np.flatnonzero(np.asarray(obs[lo:hi]))) == state.legal_actions()
            mover = state.current_player()
            a = int(rng.choice(state.legal_actions()))
            state.apply_action(a)
            obs, inner, reward, terminated, _ = step(jax.random.PRNGKey(0), inner, jnp.int32(a))
            assert bool(terminated) == state.is_terminal()
            last_reward = float(reward)
        assert last_reward == state.returns()[mover]  # the mover's reward: +1 for the winning move, 0 for a draw
        outcomes.add(last_reward)
    assert 1.0 in outcomes


def test_value_targets_alternate_for_two_players_and_stop_at_game_ends():
    # one env, rows 0..4: the move from row 1 wins (row 2 is the game's last), row 3 starts a new game, cut after row 4
    reward = jnp.array([0.0, 1.0, 0.0, 0.0, 0.0])[:, None]
    terminated = jnp.array([False, True, False, False, False])[:, None]
    truncated = jnp.zeros_like(terminated)
    searched = jnp.zeros((5, 1))
    z = value_targets(reward, terminated, truncated, searched, jnp.array([0.5]), -1.0)[:, 0]
    np.testing.assert_allclose(z[:2], [-1.0, 1.0])  # the winner's move +1, the loser's move before it -1
    np.testing.assert_allclose(z[3:], [0.5, -0.5])  # the bootstrap's value, seen from each mover
    z1 = value_targets(reward, terminated, jnp.array([False, False, False, True, False])[:, None],
                       jnp.full((5, 1), 0.25), jnp.array([0.5]), 0.9)[:, 0]
    assert z1[3] == pytest.approx(0.9 * 0.25)  # a time limit: the searched value where the game was cut


def _position(moves):
    env = jax_envs.make(EnvConfig(id="pgx/connect_four", num_envs=1))
    obs, inner = env.family.reset(jax.random.PRNGKey(0))
    for a in moves:
        obs, inner = env.family.step(jax.random.PRNGKey(0), inner, jnp.int32(a))[:2]
    return env, jax.tree.map(lambda x: x[None], (obs, inner))


@pytest.mark.parametrize("moves, best", [([0, 6, 0, 6, 0, 6], 0),  # the mover wins at once in column 0
                                         ([0, 6, 1, 6, 5, 6], 6)])  # the opponent would win in column 6: block it
def test_an_untrained_search_wins_and_blocks(tmp_path, moves, best):
    env, (obs, inner) = _position(moves)
    cfg = _cfg(tmp_path)
    algo = make_algo(cfg, env.spec)
    params = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
    action, policy, _ = algo.search(params, jax.random.PRNGKey(1), obs, inner, env_model(env), 200, explore=False)
    assert int(action[0]) == best
    assert int(jnp.argmax(policy[0])) == best


def test_searched_rows_hold_legal_policies_and_weigh_nothing_at_game_ends(tmp_path):
    cfg = _cfg(tmp_path, env=EnvConfig(id="pgx/tic_tac_toe", num_envs=4))
    env = jax_envs.make(cfg.env)
    algo = make_algo(cfg, env.spec)
    program = SearchProgram(env, algo, num_steps=24, max_iterations=1)
    state = algo.init(jax.random.PRNGKey(0))
    carry = program.start(state, jax.random.PRNGKey(1), jax.random.PRNGKey(2))
    state, carry, (metrics, ep_return, ep_length, _) = jax.jit(program.iteration)(state, carry)
    batch = carry.replay
    obs, policy, weight = np.asarray(batch.obs[0]), np.asarray(batch.policy[0]), np.asarray(batch.weight[0])
    lo, hi = env.spec.legal_actions
    legal = obs[:, lo:hi] > 0.5
    searched = weight > 0
    np.testing.assert_allclose(policy[searched].sum(-1), 1.0, rtol=1e-5)
    assert np.all(policy[searched][~legal[searched]] == 0)  # no weight on an illegal move
    assert not np.any(searched & ~legal.any(-1))  # a finished board is never a training row
    # one unsearched row per finished game (a game that ended on the last step has its last row in the carry)
    assert (~searched).sum() == np.isfinite(np.asarray(ep_return)[:-1]).sum() > 0
    assert np.all(np.abs(np.asarray(batch.value[0])[searched]) <= 1.0 + 1e-6)
    assert np.isfinite(float(metrics["loss"]))


def test_the_plan_and_what_alphazero_refuses(tmp_path):
    cfg = _cfg(tmp_path)
    assert plan_of(cfg).loop == "anakin" and plan_of(cfg).consumes == "search"
    with pytest.raises(ConfigError, match="must be a JAX env"):
        check(_cfg(tmp_path, env=EnvConfig(id="CartPole-v1")))
    with pytest.raises(ConfigError, match="runs on the device"):
        check(dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, mode="distributed")))
    with pytest.raises(ConfigError, match="OpenSpiel bots play"):
        check(_cfg(tmp_path, env=EnvConfig(id="pgx/othello", num_envs=16), selfplay=SelfPlayConfig(bots=("random",))))
    with pytest.raises(ConfigError, match="2 players taking turns"):
        check(_cfg(tmp_path, algo=PPOConfig(num_steps=8)))


def test_a_short_run_evaluates_against_the_bots_and_resumes_exactly(tmp_path):
    pytest.importorskip("pyspiel")
    common = dict(selfplay=SelfPlayConfig(bots=("random",), bot_games=6), eval=EvalConfig(every_updates=2, final=True))
    full = _cfg(tmp_path, trial="full", **common)
    train(full)
    rows = [json.loads(x) for x in (tmp_path / "az" / "full" / "eval.jsonl").read_text().splitlines()]
    assert [r["version"] for r in rows] == [2, 4] and all(r["opponent"] == "random" and r["games"] == 6 for r in rows)
    assert all(abs(r["win_rate"] + r["draw_rate"] + r["loss_rate"] - 1) < 1e-9 for r in rows)
    from srljax.storage.steps import read_meta

    best_version = max(rows, key=lambda r: (r["win_rate"], -r["version"]))["version"]
    assert read_meta(tmp_path / "az" / "full" / "best")[1]["version"] == best_version  # eval.keep_best
    half = _cfg(tmp_path, trial="half", total_env_steps=16 * 8 * 2, checkpoint=CheckpointConfig(every_updates=2))
    train(half)
    train(dataclasses.replace(half, total_env_steps=16 * 8 * 4), resume=True)
    a, b = ([json.loads(x) for x in (tmp_path / "az" / t / "metrics.jsonl").read_text().splitlines()]
            for t in ("full", "half"))
    assert [r["update"] for r in b] == [1, 2, 3, 4]
    for x, y in zip(a, b):
        for key in ("policy_loss", "value_loss", "searched_value"):
            np.testing.assert_allclose(x[key], y[key], rtol=1e-4, atol=1e-5)


def test_connect_four_mirror_is_the_same_game_reversed():
    env = jax_envs.make(EnvConfig(id="pgx/connect_four", num_envs=1))
    (o_idx, a_idx), = env.family.symmetries
    _, (obs, _) = _position([0, 1, 1])
    _, (mirrored, _) = _position([6, 5, 5])
    np.testing.assert_array_equal(np.asarray(obs[0])[o_idx], np.asarray(mirrored[0]))
    assert list(a_idx) == [6, 5, 4, 3, 2, 1, 0]


def test_opening_moves_are_random_legal_moves(tmp_path):
    cfg = _cfg(tmp_path, env=EnvConfig(id="pgx/tic_tac_toe", num_envs=4))
    env = jax_envs.make(cfg.env)
    program = SearchProgram(env, make_algo(cfg, env.spec), num_steps=4, max_iterations=1)
    o, inner = env.family.reset(jax.random.PRNGKey(0))
    for a in (4, 0):  # two cells taken
        o, inner = env.family.step(jax.random.PRNGKey(0), inner, jnp.int32(a))[:2]
    rows = jnp.repeat(o[None], 2000, axis=0)
    moves = np.asarray(program._random_legal(jax.random.PRNGKey(3), rows))
    assert set(moves) == {1, 2, 3, 5, 6, 7, 8}  # every legal cell, never a taken one
    assert np.bincount(moves, minlength=9)[[1, 2, 3, 5, 6, 7, 8]].min() > 200  # about uniform (2000 / 7 each)
