"""PSRO: the meta-solvers on games with known equilibria, a game tree's exact values and exploitability against
OpenSpiel's, the config's refusals, and a short run end to end (``srljax/loops/psro.py``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from srljax.config import (
    CheckpointConfig,
    ConfigError,
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    PPOConfig,
    PSROConfig,
    validate,
)
from srljax.population.meta_solvers import (
    exploitability_in_meta_game,
    meta_strategy,
    nash_zero_sum,
    project_simplex,
)

RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])  # row: rock, paper, scissors
PENNIES = np.array([[1.0, -1.0], [-1.0, 1.0]])


# -- meta-solvers ----------------------------------------------------------------------------------

def test_nash_of_rock_paper_scissors_and_matching_pennies_is_uniform():
    for game in (RPS, PENNIES):
        row, col, value = nash_zero_sum(game)
        np.testing.assert_allclose(row, np.full(len(game), 1 / len(game)), atol=1e-9)
        np.testing.assert_allclose(col, np.full(len(game), 1 / len(game)), atol=1e-9)
        assert value == pytest.approx(0.0, abs=1e-9)


def test_nash_of_a_skewed_game_is_its_known_mixture_and_value():
    # row plays top with p: 2p - (1 - p) = -p + (1 - p) -> p = 0.4, value 0.2; column: q = 0.4 likewise
    row, col, value = nash_zero_sum(np.array([[2.0, -1.0], [-1.0, 1.0]]))
    np.testing.assert_allclose(row, [0.4, 0.6], atol=1e-9)
    np.testing.assert_allclose(col, [0.4, 0.6], atol=1e-9)
    assert value == pytest.approx(0.2)
    # a dominated strategy gets no weight
    row, _, value = nash_zero_sum(np.array([[1.0, 1.0], [0.0, 0.0]]))
    np.testing.assert_allclose(row, [1.0, 0.0], atol=1e-9)
    assert value == pytest.approx(1.0)


@pytest.mark.parametrize("solver", ["prd", "fictitious_play"])
def test_iterative_solvers_approach_the_uniform_equilibrium_of_rock_paper_scissors(solver):
    sigma = meta_strategy(RPS, solver, iterations=20_000)
    np.testing.assert_allclose(sigma, np.full(3, 1 / 3), atol=0.02)
    assert exploitability_in_meta_game(RPS, sigma) < 0.03
    # biased RPS (winning with paper pays 2): its Nash is not uniform, and the solvers find it too
    biased = np.array([[0.0, -2.0, 1.0], [2.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
    nash = meta_strategy(biased, "nash")
    np.testing.assert_allclose(nash, [0.25, 0.25, 0.5], atol=1e-9)
    np.testing.assert_allclose(meta_strategy(biased, solver), nash, atol=0.03)


def test_uniform_solver_and_meta_exploitability():
    np.testing.assert_allclose(meta_strategy(RPS, "uniform"), np.full(3, 1 / 3))
    assert exploitability_in_meta_game(RPS, np.array([1.0, 0.0, 0.0])) == pytest.approx(1.0)  # paper beats rock
    assert exploitability_in_meta_game(RPS, np.full(3, 1 / 3)) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="psro.solver='lp': use one of nash, uniform, prd, fictitious_play"):
        meta_strategy(RPS, "lp")
    with pytest.raises(ValueError, match="square and finite"):
        meta_strategy(np.ones((2, 3)), "nash")


def test_projection_onto_the_simplex_keeps_the_floor():
    x = project_simplex(np.array([0.9, 0.5, -0.3]), floor=0.05)
    assert x.sum() == pytest.approx(1.0) and x.min() >= 0.05 - 1e-12
    np.testing.assert_allclose(project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])


# -- the game tree -----------------------------------------------------------------------------------

def kuhn_tree(info_state: bool = True):
    import pyspiel

    from envs.openspiel import observe
    from srljax.population.game_tree import GameTree

    game = pyspiel.load_game("kuhn_poker")
    return GameTree(game, lambda state, player: observe(game, state, player, None, info_state))


def kuhn_nash(tree, alpha: float = 0.0) -> np.ndarray:
    """Kuhn poker's known equilibrium family (cards 0 J, 1 Q, 2 K; actions 0 pass, 1 bet): P(bet) per info state."""
    bet = {"0": alpha, "1": 0.0, "2": 3 * alpha, "0pb": 0.0, "1pb": alpha + 1 / 3, "2pb": 1.0,  # player 0
           "0p": 1 / 3, "1p": 0.0, "2p": 1.0, "0b": 0.0, "1b": 1 / 3, "2b": 1.0}  # player 1
    return np.array([[1 - bet[k], bet[k]] for k in tree.keys])


def test_kuhn_tree_exploitability_of_known_policies():
    tree = kuhn_tree()
    assert tree.num_nodes == 58 and len(tree.keys) == 12
    assert tree.exploitability(tree.uniform()) == pytest.approx(0.458333, abs=1e-5)  # OpenSpiel's figure
    for alpha in (0.0, 1 / 6, 1 / 3):
        nash = kuhn_nash(tree, alpha)
        assert tree.exploitability(nash) == pytest.approx(0.0, abs=1e-9)
        assert tree.seat_values(nash[None])[0, 0] == pytest.approx(-1 / 18)  # the game's value to seat 0
    always_bet = tree.table(np.tile([0.0, 1.0], (12, 1)))
    assert tree.exploitability(always_bet) > 0.3


def test_tree_values_match_openspiel_and_the_mixture_plays_as_the_draw():
    from open_spiel.python.algorithms import expected_game_score

    tree = kuhn_tree()
    rng = np.random.default_rng(0)
    tables = np.stack([tree.table(rng.random((12, 2))) for _ in range(3)])
    values = tree.seat_values(tables)
    policies = [tree.openspiel_policy(t) for t in tables]
    for i in range(3):
        for j in range(3):
            want = expected_game_score.policy_value(tree.game.new_initial_state(), [policies[i], policies[j]])[0]
            assert values[i, j] == pytest.approx(want, abs=1e-12)
    payoff = tree.payoff(tables)
    np.testing.assert_allclose(payoff, -payoff.T, atol=1e-12)
    sigma = np.array([0.2, 0.5, 0.3])
    mixed = tree.mixture(tables, sigma)
    with_mix = tree.seat_values(np.concatenate([tables, mixed[None]]))
    # the mixture as one behaviour policy is worth, against any opponent and in either seat, what the draw is worth
    np.testing.assert_allclose(with_mix[3, :3], sigma @ values, atol=1e-12)
    np.testing.assert_allclose(with_mix[:3, 3], values @ sigma, atol=1e-12)
    # averaging the action probabilities instead is a different policy here
    averaged = np.einsum("p,pka->ka", sigma, tables)
    assert not np.allclose(tree.seat_values(np.stack([averaged, tables[0]]))[0, 1], with_mix[3, 0])


def test_a_game_too_big_to_walk_is_one_clear_error():
    import pyspiel

    from envs.openspiel import observe
    from srljax.population.game_tree import GameTree

    game = pyspiel.load_game("tic_tac_toe")
    with pytest.raises(ValueError, match="more than 1,000 histories; use a small game"):
        GameTree(game, lambda state, player: observe(game, state, player), max_nodes=1000)


def test_the_env_shows_the_information_state_tensor_when_asked():
    import envs

    env = envs.make(EnvConfig(factory="envs.openspiel:make_openspiel",
                              options={"game": "leduc_poker", "info_state": True}, num_envs=2), seed=0)
    assert env.spec.obs_shape == (30 + 2 + 3,)
    env.close()
    plain = envs.make(EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "leduc_poker"},
                                num_envs=2), seed=0)
    assert plain.spec.obs_shape == (16 + 2 + 3,)
    plain.close()
    with pytest.raises(ValueError, match="info_state=true with egocentric=true"):
        envs.make(EnvConfig(factory="envs.openspiel:make_openspiel",
                            options={"game": "tic_tac_toe", "info_state": True, "egocentric": True}), seed=0)


# -- the config and the loop ----------------------------------------------------------------------------

def kuhn_config(tmp_path, **psro) -> Experiment:
    return Experiment(
        name="psro", trial="t", total_env_steps=2 * 256,
        env=EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "kuhn_poker", "info_state": True},
                      num_envs=8),
        algo=PPOConfig(num_steps=32, gamma=1.0, gae_lambda=1.0, network="mlp", hidden_sizes=(16,)),
        psro=PSROConfig(enabled=True, **{"iterations": 2, **psro}),
        checkpoint=CheckpointConfig(final=False), log=LogConfig(run_root=str(tmp_path), log_every=1))


def test_config_refusals_name_the_key_and_the_fix(tmp_path):
    import dataclasses

    cfg = kuhn_config(tmp_path)
    assert validate(cfg) is cfg
    bad = dataclasses.replace(cfg, env=EnvConfig(id="CartPole-v1"),
                              layout=LayoutConfig(mode="distributed", inference="remote"), total_env_steps=100)
    with pytest.raises(ConfigError) as err:
        validate(bad)
    text = str(err.value)
    assert "psro.enabled=true needs a two-player zero-sum game: env.factory=envs.openspiel:make_openspiel" in text
    assert "PSRO's actors act inline" in text and "set layout.inference=inline" in text  # the graph's refusals
    assert "50 env steps per best response, less than one update's 256; raise total_env_steps to at least 512" in text
    with pytest.raises(ConfigError, match="psro.solver='lp' .* must be one of 'nash', 'uniform', 'prd'"):
        validate(dataclasses.replace(cfg, psro=PSROConfig(enabled=True, solver="lp")))


@pytest.mark.slow
def test_a_short_psro_run_writes_its_iterations(tmp_path):
    """Two best responses of two updates each, end to end through ``train`` (~10 s on an idle 2-core box, 28 s
    under load: compiles dominate)."""
    from srljax.loops.psro import read_lines
    from srljax.loops.train import train

    cfg = kuhn_config(tmp_path)
    result = train(cfg)
    lines = read_lines(cfg.run_dir)
    assert [x["iteration"] for x in lines] == [0, 1, 2] and [x["policies"] for x in lines] == [1, 2, 3]
    assert lines[0]["exploitability"] == pytest.approx(0.458, abs=0.01)  # the untrained network: near uniform
    payoff = np.array(lines[-1]["payoff"])
    np.testing.assert_allclose(payoff, -payoff.T, atol=1e-5)
    assert all(len(x["meta_strategy"]) == x["policies"] and sum(x["meta_strategy"]) == pytest.approx(1, abs=1e-4)
               for x in lines)
    assert sorted(p.name for p in (cfg.run_dir / "psro" / "policies").iterdir()) == [
        "p0.msgpack", "p1.msgpack", "p2.msgpack"]
    assert (cfg.run_dir / "psro" / "exploitability.png").exists()
    metrics = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {m["iteration"] for m in metrics} == {1, 2} and result.env_steps == lines[-1]["env_steps"] > 0


@pytest.mark.slow
def test_psro_on_kuhn_poker_cuts_exploitability(tmp_path):
    """Learning, not only plumbing: four best responses of 10k env steps each take the near-uniform start (0.458)
    below 0.25."""
    import dataclasses

    from srljax.loops.psro import read_lines
    from srljax.loops.train import train

    cfg = kuhn_config(tmp_path, iterations=4)
    cfg = dataclasses.replace(cfg, total_env_steps=40_000, algo=PPOConfig(num_steps=32, gamma=1.0, gae_lambda=1.0,
                                                                          network="mlp", ent_coef=0.01))
    train(cfg)
    lines = read_lines(cfg.run_dir)
    assert lines[-1]["exploitability"] < 0.25


def test_a_greedy_member_acts_by_its_mode_and_a_sampling_one_samples(tmp_path):
    import jax

    import algos
    import envs
    from envs.openspiel import observe
    from srljax.loops.psro import opponent_act

    cfg = kuhn_config(tmp_path)
    env = envs.make(cfg.env, seed=0)
    algo = algos.make(cfg, env.spec)
    env.close()
    params = algo.policy_params(jax.jit(algo.init)(jax.random.PRNGKey(3)))
    state = env.game.new_initial_state()
    state.apply_action(0)
    state.apply_action(1)  # dealt: player 0 holds the jack, to act
    obs = np.tile(observe(env.game, state, 0, None, True), (256, 1))
    mode = np.asarray(algo.act_deterministic(params, obs, (), None, jax.random.PRNGKey(0))[0])
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    greedy = [np.asarray(opponent_act(algo, {"net": params, "greedy": np.float32(1)}, obs, (), None, k)[0]) for k in keys]
    sampled = np.concatenate([np.asarray(opponent_act(algo, {"net": params, "greedy": np.float32(0)}, obs, (), None, k)[0])
                              for k in keys])
    assert all((g == mode).all() for g in greedy)
    assert set(sampled.tolist()) == {0, 1}  # the untrained network is near uniform: both moves come up
