"""JaxMARL's envs (SMAX, MPE, Overcooked, Hanabi) on the Anakin path with the agent axis (``envs/jax_envs/jaxmarl_family.py``)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import jax_envs
from envs.jax_envs import jaxmarl_family
from srljax.config import ConfigError, EnvConfig, Experiment, LogConfig, MAPPOConfig, PPOConfig, TrainerConfig
from srljax.layout import plan_of
from srljax.loops.train import train
from srljax.prepare import check
from srljax.telemetry.metrics import EpisodeWindow

pytest.importorskip("jaxmarl")


def _rollout(env: jax_envs.JaxEnv, actions: list[np.ndarray], state=None):
    if state is None:
        state, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    rows = []
    for a in actions:
        state, ts = step(state, jnp.asarray(a, jnp.int32))
        rows.append((jax.device_get(ts), np.asarray(env.episode_won(state))))
    return state, rows


def test_smax_rows_time_limit_and_a_win():
    """One SMAX env (compiled once): the packed rows, a time limit that truncates, a wiped-out enemy that is a win."""
    cfg = EnvConfig(id="jaxmarl/smax:3m", num_envs=2, max_episode_steps=4, options={"enemy_shoots": False})
    env = jax_envs.make(cfg)
    s = env.spec
    assert (s.num_agents, s.agent_obs_size, s.state_size, s.num_actions, s.max_episode_steps) == (3, 75, 72, 8, 4)
    assert s.obs_shape == (3, 75 + 72 + 8) and s.action_shape == (3,) and s.action_mask and not s.agent_rewards
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(0))
    inner_env, row = jaxmarl_family.build(cfg), s.agent_row()
    inner0 = jax.tree.map(lambda x: x[0], state.inner)
    legal = inner_env.get_avail_actions(inner0)
    np.testing.assert_array_equal(np.asarray(ts.obs[0, :, row["mask"]]),
                                  np.stack([np.asarray(legal[a], np.float32) for a in inner_env.agents]))
    world = np.asarray(inner_env.get_world_state(inner0))
    for agent in range(3):  # the same global state in every agent's row
        np.testing.assert_allclose(np.asarray(ts.obs[0, agent, row["state"]]), world, rtol=1e-6)
    views = np.asarray(ts.obs[0, :, row["view"]])
    assert not np.allclose(views[0], views[1])  # each agent its own view

    stop = np.zeros((2, 3), np.int32) + 4  # every ally stands still (action 4: stop); the enemy does not shoot
    _, rows = _rollout(env, [stop] * 6, state)
    trunc = np.array([ts.truncated for ts, _ in rows])
    assert trunc[3].all() and trunc.sum() == 2 and not np.array([ts.terminated for ts, _ in rows]).any()
    assert (rows[3][0].episode_length == 4).all() and (rows[4][0].reward == 0).all()  # then the reset row
    won = np.array([w for _, w in rows])
    assert (won[3] == 0).all() and np.isnan(won[[0, 1, 2, 4, 5]]).all()  # an outcome only where an episode ended
    # every enemy at 0 health: the next step ends the episode terminated, won, with JaxMARL's win bonus
    health = state.inner.state.unit_health.at[:, 3:].set(0.0)
    state = state._replace(inner=state.inner.replace(state=state.inner.state.replace(unit_health=health)))
    _, rows = _rollout(env, [stop], state)
    ts, won = rows[0]
    assert ts.terminated.all() and not ts.truncated.any() and (won == 1.0).all()
    np.testing.assert_allclose(ts.reward, 1.0)


def test_mpe_rewards_per_agent_and_the_team_reward_is_their_sum():
    env = jax_envs.make(EnvConfig(id="jaxmarl/mpe:simple_spread", num_envs=3))
    s = env.spec
    assert s.agent_rewards and not s.action_mask and s.state_size == 0 and s.obs_shape == (3, 18 + 1)
    assert s.max_episode_steps == 26  # JaxMARL's max_steps=25 ends on the 26th step
    _, rows = _rollout(env, [np.random.default_rng(0).integers(0, 5, (3, 3))] * 27)
    ts = rows[0][0]
    own = ts.obs[:, :, s.agent_row()["reward"]][..., 0]
    np.testing.assert_allclose(ts.reward, own.sum(axis=1), rtol=1e-5)
    trunc = np.array([r.truncated for r, _ in rows])
    assert trunc[25].all() and trunc.sum() == 3 and not np.array([r.terminated for r, _ in rows]).any()
    assert np.isnan(rows[25][1]).all()  # MPE reports no outcome


def test_hanabi_only_the_player_to_move_has_a_choice():
    env = jax_envs.make(EnvConfig(id="jaxmarl/hanabi", num_envs=4))
    s = env.spec
    assert s.num_agents == 2 and s.action_mask and s.num_actions == 21
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    rng = np.random.default_rng(0)
    for _ in range(30):  # random legal play: at every step one player has several legal moves, the other one
        legal = np.asarray(ts.obs[..., s.agent_row()["mask"]]) > 0.5
        counts = legal.sum(-1)
        live = ~np.asarray(ts.terminated)
        assert (np.sort(counts[live], axis=-1)[:, 0] == 1).all() and (counts[live].max(-1) > 1).all()
        action = np.array([[rng.choice(np.flatnonzero(legal[b, i])) for i in range(2)] for b in range(4)], np.int32)
        state, ts = step(state, jnp.asarray(action))


def test_overcooked_spec():
    s = jax_envs.make(EnvConfig(id="jaxmarl/overcooked:cramped_room", num_envs=2)).spec
    assert s.obs_shape == (2, 4 * 5 * 26) and s.num_actions == 6 and s.max_episode_steps == 400
    assert not s.agent_rewards and not s.action_mask


def test_bad_ids_and_options_are_one_clear_error_each(tmp_path):
    assert "use jaxmarl/smax:<name> with one of" in jax_envs.problems(EnvConfig(id="jaxmarl/smax:4m"))[0]
    assert "jaxmarl envs here are" in jax_envs.problems(EnvConfig(id="jaxmarl/football"))[0]
    assert "does not take" in jax_envs.problems(EnvConfig(id="jaxmarl/smax:3m", options={"speed": 2}))[0]
    assert "no time limit" in jax_envs.problems(EnvConfig(id="jaxmarl/hanabi", max_episode_steps=10))[0]
    assert "env.max_episode_steps=25" in jax_envs.problems(EnvConfig(id="jaxmarl/mpe:simple_spread",
                                                                     options={"max_steps": 25}))[0]
    base = Experiment(name="m", trial="t", total_env_steps=4096, env=EnvConfig(id="jaxmarl/mpe:simple_spread"),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    with pytest.raises(ConfigError, match="algo=ppo acts for one agent and jaxmarl/mpe:simple_spread has 3"):
        check(dataclasses.replace(base, algo=PPOConfig()))
    check(dataclasses.replace(base, algo=MAPPOConfig()))  # a multi-agent algorithm is accepted


def test_window_win_rate_counts_only_reported_outcomes():
    w = EpisodeWindow(3)
    w.add(np.array([1.0, np.nan, 2.0]), np.array([5, 0, 6]), np.array([0.0, np.nan, 1.0]))
    assert w.summary()["win_rate"] == 0.5
    w.add(np.array([3.0]), np.array([4]))  # an env without outcomes: returns counted, no win entry
    assert w.summary()["win_rate"] == 0.5 and w.summary()["episodes"] == 3
    w.add(np.array([2.0, 2.0]), np.array([1, 1]), np.array([1.0, 1.0]))
    assert w.summary()["win_rate"] == 1.0  # the window keeps the last 3 outcomes
    restored = EpisodeWindow(3)
    restored.load_state(json.loads(json.dumps(w.state())))
    assert restored.summary() == w.summary()


def test_outcomes_travel_in_segment_meta_and_malformed_ones_count_as_none():
    """The worker graph's path for ``win_rate``: an actor's ``episode_wins`` (codec round trip) into the trainer's
    window; wrong values, shapes or too many for the segment are dropped, not raised."""
    from srljax.comm.codec import decode, encode
    from srljax.system.shell.common import episode_meta, episodes_from_meta, wins_from_meta

    meta = episode_meta([1.5, 0.2], [16, 20], [1.0, 0.0])
    assert episode_meta([1.0], [3]) == {"episode_returns": [1.0], "episode_lengths": [3]}  # no outcomes: no key
    w = EpisodeWindow(10)
    back = decode(encode("samples", "t", {"x": np.zeros(1)}, meta=meta), "t").meta
    w.add(*episodes_from_meta(back))
    w.add_wins(wins_from_meta(back, max_count=4))
    assert w.summary()["win_rate"] == 0.5 and w.summary()["episodes"] == 2
    for bad in ([0.5], [[1.0]], ["won"], [1.0] * 5):
        assert wins_from_meta({"episode_wins": bad}, max_count=4).size == 0, bad


def test_mappo_on_mpe_in_the_anakin_loop(tmp_path):
    cfg = Experiment(name="mpe", trial="t", total_env_steps=8 * 32 * 3,
                     env=EnvConfig(id="jaxmarl/mpe:simple_spread", num_envs=8),
                     algo=MAPPOConfig(num_steps=32, hidden_sizes=(32,)), trainer=TrainerConfig(num_minibatches=2, update_epochs=1),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    assert plan_of(cfg).loop == "anakin"
    result = train(cfg)
    lines = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in lines] == [1, 2, 3] and result.env_steps == 768
    # 96 steps of each env: three 26-step episodes and their reset rows
    assert lines[-1]["episodes"] == 24 and lines[-1]["episode_length"] == 26 and "win_rate" not in lines[-1]


@pytest.mark.slow
def test_mappo_trains_on_smax_in_the_anakin_loop(tmp_path):
    cfg = Experiment(name="smax", trial="t", total_env_steps=8 * 16 * 3, env=EnvConfig(id="jaxmarl/smax:3m", num_envs=8),
                     algo=MAPPOConfig(num_steps=16, hidden_sizes=(32,)),
                     trainer=TrainerConfig(num_minibatches=2, update_epochs=1),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    assert plan_of(cfg).loop == "anakin"
    result = train(cfg)
    lines = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in lines] == [1, 2, 3] and result.env_steps == 384
    assert all(0.0 <= r["win_rate"] <= 1.0 for r in lines if "win_rate" in r)
    assert any("win_rate" in r for r in lines) and lines[-1]["legal_actions"] < 8  # the masks reach the policy


@pytest.mark.slow  # each actor compiles SMAX's step (minutes on a crowded 2-core box), then ~1-2 min of training
def test_smax_mappo_learns_as_a_worker_graph(tmp_path):
    """configs/smax_3m_mappo.py as a worker graph (threads: 2 actors stepping SMAX on the host, a trainer): the lines
    carry the actors' SMAX outcomes (``win_rate``) and the team return rises well above random play's (~0.18 on the
    first line; bench/RESULTS.md, session 24 issue 41: 1.07 at 52k env steps, 1.39 and win rate 0.48 at 102k)."""
    import math
    from pathlib import Path

    from launch.threads import run_threads
    from srljax.config import LayoutConfig, apply_overrides, load_file

    base = load_file(Path(__file__).resolve().parents[1] / "configs" / "smax_3m_mappo.py")
    cfg = dataclasses.replace(
        base, trial="graph", total_env_steps=16 * 32 * 120, env=dataclasses.replace(base.env, num_envs=8),
        algo=dataclasses.replace(base.algo, num_steps=32),
        trainer=dataclasses.replace(base.trainer, batch_envs=16, num_minibatches=2, update_epochs=2),
        layout=LayoutConfig(mode="distributed", num_actors=2, inference="inline", stall_seconds=1200))
    cfg = apply_overrides(cfg, [f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines",
                                "log.window=50"])
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    lines = result.metrics
    assert lines[-1]["update"] == 120 and all(math.isfinite(x["value_loss"]) for x in lines)
    assert all(0.0 <= x["win_rate"] <= 1.0 for x in lines if "win_rate" in x) and "win_rate" in lines[-1]
    assert 1.0 < lines[-1]["legal_actions"] < 8.0  # the legal-action flags reach the policy
    assert lines[0]["episode_return"] < 0.4 and lines[-1]["episode_return"] > 0.6, \
        [(x["env_steps"], round(x["episode_return"], 2)) for x in lines[::10]]


@pytest.mark.slow  # each actor compiles the env's step: 1-3 min on a crowded 2-core box
@pytest.mark.parametrize("name, extra, legal", [
    ("overcooked_cramped_room_ppo", ["env.max_episode_steps=64"], None),  # 64-step episodes: several end
    ("hanabi_mappo", [], 21),
])
def test_overcooked_and_hanabi_mappo_run_as_a_worker_graph(tmp_path, name, extra, legal):
    """The shipped Overcooked and Hanabi configs as worker graphs (threads: 2 actors stepping the env on the host,
    inline inference, a trainer), 6 updates: the trainer's lines carry the actors' episodes (Overcooked's score,
    Hanabi's), Hanabi's legal-move flags reach the policy (the player to move has several, the other the no-op
    alone: a mean between 1 and 21), and no outcomes (only SMAX reports them)."""
    import math
    from pathlib import Path

    from launch.threads import run_threads
    from srljax.config import apply_overrides, load_file

    base = load_file(Path(__file__).resolve().parents[1] / "configs" / f"{name}.py")
    cfg = apply_overrides(base, [
        "layout.mode=distributed", "layout.num_actors=2", "layout.inference=inline", "layout.stall_seconds=1200",
        "env.num_envs=8", "algo.num_steps=32", "trainer.batch_envs=16", "trainer.num_minibatches=2",
        "trainer.update_epochs=2", f"total_env_steps={16 * 32 * 6}", "trial=graph", f"log.run_root={tmp_path}",
        "log.wandb=disabled", "log.progress=lines", "log.window=50", *extra])
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    lines = result.metrics
    assert lines[-1]["update"] == 6 and all(math.isfinite(x["value_loss"]) for x in lines)
    assert lines[-1]["episodes"] > 0 and math.isfinite(lines[-1]["episode_return"]) and lines[-1]["episode_return"] >= 0
    assert not any("win_rate" in x for x in lines)
    if legal:
        assert 1.0 < lines[-1]["legal_actions"] < legal
    else:
        assert "legal_actions" not in lines[-1]


def test_hanabi_the_waiting_players_action_has_no_effect():
    """From the same state and key, whatever the player not to move sends (its one legal move, the no-op, or any
    other), the step is the same: only the player to move acts."""
    fam = jaxmarl_family.family(EnvConfig(id="jaxmarl/hanabi"))
    row, n_act = fam.spec.agent_row(), fam.spec.num_actions
    step = jax.jit(jax.vmap(fam.step, in_axes=(None, None, 0)))  # one state, a batch of joint actions
    obs, inner = jax.jit(fam.reset)(jax.random.PRNGKey(3))
    one = jax.jit(fam.step)
    rng = np.random.default_rng(3)
    checked = 0
    for t in range(12):
        legal = np.asarray(obs[:, row["mask"]]) > 0.5
        mover = int(np.argmax(legal.sum(-1)))
        assert legal.sum(-1)[1 - mover] == 1 and legal[1 - mover, n_act - 1]  # the waiting player: the no-op only
        move = int(rng.choice(np.flatnonzero(legal[mover])))
        joint = np.zeros((n_act, 2), np.int32)
        joint[:, mover], joint[:, 1 - mover] = move, np.arange(n_act)  # the waiting player tries every action
        key = jax.random.PRNGKey(100 + t)
        out = jax.device_get(step(key, inner, jnp.asarray(joint)))
        for leaf in jax.tree.leaves(out):
            np.testing.assert_array_equal(leaf, np.broadcast_to(leaf[:1], leaf.shape))
        checked += 1
        obs, inner, _, terminated, _ = one(key, inner, jnp.asarray(joint[n_act - 1]))
        if bool(terminated):
            break
    assert checked >= 3


def test_hanabi_masked_policy_plays_only_legal_moves_and_the_return_is_the_score(tmp_path):
    """MAPPO's policy (fresh parameters: spread over the legal moves) on 16 games until several end: every sampled
    move is legal, the waiting player's always the no-op; an ended game's return is its score (the fireworks built,
    0 when the team lost its last life)."""
    from algos.mappo import make_mappo

    cfg = Experiment(name="h", trial="t", env=EnvConfig(id="jaxmarl/hanabi", num_envs=16), algo=MAPPOConfig(),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    env = jax_envs.make(cfg.env)
    s, row = env.spec, env.spec.agent_row()
    algo = make_mappo(cfg, s)
    pp = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
    act = jax.jit(lambda obs, key: algo.act(pp, obs, (), None, key)[0])
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(1))
    step = jax.jit(env.step)
    moves, ended = set(), 0
    for t in range(120):
        legal = np.asarray(ts.obs[..., row["mask"]]) > 0.5  # [B, 2, 21]
        action = act(ts.obs, jax.random.PRNGKey(t))
        live = ~np.asarray(ts.terminated)  # a finished game's row: its action is dropped (the next step resets)
        a, legal = np.asarray(action)[live], legal[live]
        assert np.take_along_axis(legal, a[..., None], -1).all()  # never an illegal move
        waiting = legal.sum(-1) == 1
        assert (a[waiting] == s.num_actions - 1).all() and (waiting.sum(-1) == 1).all()
        moves |= set(a[~waiting].tolist())
        state, ts = step(state, action)
        done = np.asarray(ts.terminated)
        if done.any():
            inner = jax.device_get(state.inner)
            score = np.where(inner.out_of_lives, 0, inner.fireworks.reshape(16, -1).sum(-1))
            np.testing.assert_array_equal(np.asarray(ts.episode_return)[done], score[done])
            ended += int(done.sum())
    assert ended >= 8 and len(moves) > 8  # the player to move chose among many moves


def test_overcooked_shaped_reward_trains_and_the_score_stays_the_delivery_reward():
    """``env.options.reward_shaping``: the agents' rows carry delivery + weight * JaxMARL's shaped reward; the team
    reward (the episode return) is the delivery reward alone. Cook 0 fetches an onion and puts it in the pot."""
    plain = jaxmarl_family.family(EnvConfig(id="jaxmarl/overcooked:cramped_room"))
    fam = jaxmarl_family.family(EnvConfig(id="jaxmarl/overcooked:cramped_room", options={"reward_shaping": 0.5}))
    s = fam.spec
    assert s.agent_rewards and s.obs_shape == (2, 520 + 1) and plain.spec.obs_shape == (2, 520)
    reward_col = s.agent_row()["reward"]
    up, right, left, stay, interact = 0, 2, 3, 4, 5
    script = [left, interact, right, up, interact]  # face the onion pile, take one, step under the pot, face it, put
    step, p_step = jax.jit(fam.step), jax.jit(plain.step)
    obs, inner = jax.jit(fam.reset)(jax.random.PRNGKey(0))
    p_obs, p_inner = jax.jit(plain.reset)(jax.random.PRNGKey(0))
    rows, teams = [], []
    for t, a in enumerate(script):
        key, joint = jax.random.PRNGKey(t), jnp.array([a, stay], jnp.int32)
        obs, inner, team, terminated, truncated = step(key, inner, joint)
        p_obs, p_inner, p_team, *_ = p_step(key, p_inner, joint)
        np.testing.assert_array_equal(np.asarray(obs[:, :520]), np.asarray(p_obs))  # the same views
        rows.append(np.asarray(obs[:, reward_col])[:, 0])
        teams.append((float(team), float(p_team)))
    np.testing.assert_allclose(rows[-1], [0.5 * 3, 0.0])  # an onion in the pot: JaxMARL's 3, weighted 0.5
    assert all(r.sum() == 0 for r in rows[:-1]) and teams == [(0.0, 0.0)] * len(script)
    problem = jax_envs.problems(EnvConfig(id="jaxmarl/overcooked:cramped_room", options={"reward_shaping": -1}))
    assert "give a weight >= 0" in problem[0]
    assert "does not take" in jax_envs.problems(EnvConfig(id="jaxmarl/smax:3m", options={"reward_shaping": 1.0}))[0]
