"""The Anakin path: JAX envs (gymnax) behind the env seam and the loop that compiles rollout and update together."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import jax_envs
from srljax.config import ConfigError, EnvConfig, Experiment, LogConfig, PPOConfig, TrainerConfig
from srljax.config.experiment import seed_trials
from srljax.layout import plan_of
from srljax.loops.train import train
from srljax.prepare import check

pytest.importorskip("gymnax")


def _cfg(tmp_path, **kw) -> Experiment:
    base = Experiment(name="anakin", trial="t", total_env_steps=512 * 6, env=EnvConfig(id="gymnax/CartPole-v1", num_envs=4),
                      algo=PPOConfig(num_steps=128), trainer=TrainerConfig(num_minibatches=4, update_epochs=4),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    return dataclasses.replace(base, **kw)


def _metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_lazy_autoreset_and_episode_stats_as_envpool():
    env = jax_envs.make(EnvConfig(id="gymnax/Pendulum-v1", num_envs=3, max_episode_steps=5))
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    rows = []
    for _ in range(12):
        state, ts = step(state, jnp.zeros((3, 1), jnp.float32))
        rows.append(jax.device_get(ts))
    trunc = np.array([r.truncated for r in rows])
    assert trunc[4].all() and trunc[10].all() and trunc.sum() == 6  # the time limit: steps 5 and 11 of each env
    assert not np.array([r.terminated for r in rows]).any()
    reset_row = rows[5]  # the step after a done: next episode's first obs, reward 0, no flags
    assert (reset_row.reward == 0).all() and not reset_row.truncated.any()
    assert np.isnan(rows[3].episode_return).all()
    expected = np.sum([r.reward for r in rows[:5]], axis=0)
    np.testing.assert_allclose(rows[4].episode_return, expected, rtol=1e-6)
    assert (rows[4].episode_length == 5).all() and (rows[10].episode_length == 5).all()


def _random_rollout(env: jax_envs.JaxEnv, key: jax.Array, steps: int) -> tuple:
    def body(state, k):
        state, ts = env.step(state, jax.random.randint(k, (env.spec.num_envs,), 0, env.spec.num_actions))
        return state, (ts.obs, ts.terminated | ts.truncated)

    state, _ = env.reset(key)
    return jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(key, steps)))(state)


@pytest.mark.parametrize("slots", [1, 3, 16])
def test_resets_for_the_done_envs_only_give_the_same_envs(slots):
    """A costly reset (craftax) is computed only for the done envs, ``slots`` per pass: every env still gets the
    start its own key draws, so the envs are those of the reset-by-select form step for step, envs that finish
    together get distinct starts, and a seed reproduces its envs."""
    env = jax_envs.make(EnvConfig(id="gymnax/CartPole-v1", num_envs=16, max_episode_steps=7))
    assert env.reset_slots == 0  # gymnax's reset is cheap: by select
    slotted = dataclasses.replace(env, reset_slots=slots)
    key = jax.random.PRNGKey(5)
    (end, (obs, done)), (end_s, (obs_s, done_s)) = _random_rollout(env, key, 40), _random_rollout(slotted, key, 40)
    np.testing.assert_array_equal(obs_s, obs)  # bit for bit, resets included
    np.testing.assert_array_equal(done_s, done)
    for a, b in zip(jax.tree.leaves(end_s), jax.tree.leaves(end)):
        np.testing.assert_array_equal(a, b)
    done = np.asarray(done)
    assert done[6].all()  # the clock: all 16 end together, more than one pass of slots when slots < 16
    starts = np.asarray(obs_s)[7]
    assert len({tuple(row) for row in starts.round(6)}) == 16  # fresh, distinct starts
    assert not np.allclose(starts, np.asarray(obs_s)[6])
    (_, (again, _)), (_, (other, _)) = _random_rollout(slotted, key, 40), _random_rollout(slotted, jax.random.PRNGKey(6), 40)
    np.testing.assert_array_equal(again, obs_s)
    assert not np.allclose(other[7], starts)


def test_craftax_resets_only_its_done_envs():
    pytest.importorskip("craftax")
    from envs.jax_envs import craftax_family

    fam = craftax_family.family(EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1"))
    assert fam.costly_reset
    assert jax_envs.reset_slots_for(fam, 64) == 2 and jax_envs.reset_slots_for(fam, 8) == 1
    assert jax_envs.reset_slots_for(fam._replace(costly_reset=False), 64) == 0


def test_host_face_is_a_vecenv_for_eval_and_actors():
    env = envs.make(EnvConfig(id="gymnax/CartPole-v1", num_envs=2), seed=3)
    assert isinstance(env, envs.VecEnv) and env.spec.action_kind == "discrete" and env.spec.num_actions == 2
    env.async_reset()
    ts = env.recv()
    assert ts.obs.shape == (2, 4) and ts.obs.dtype == np.float32
    env.send(np.array([1, 0]), np.array([1, 0]))
    assert env.recv().obs.shape == (2, 4)
    assert np.isnan(env.episode_won).all() and not env.reports_outcomes  # gymnax reports no outcomes (SMAX does)
    with pytest.raises(ValueError, match="all 2 envs"):
        env.step(np.array([0]), np.array([0]))


def test_bad_names_options_and_missing_family_are_refused(monkeypatch):
    assert "gymnax has no env 'Nope'" in envs.problems(EnvConfig(id="gymnax/Nope"))[0]
    assert "does not take" in envs.problems(EnvConfig(id="gymnax/CartPole-v1", options={"gravty": 1.0}))[0]
    assert "leave env.batch_size=0" in envs.problems(EnvConfig(id="gymnax/CartPole-v1", num_envs=4, batch_size=2))[0]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gymnax" else real(name, *a))
    (problem,) = envs.problems(EnvConfig(id="gymnax/CartPole-v1"))
    assert "pip install -e '.[jaxenvs]'" in problem


def test_plan_picks_anakin_and_seeds_elsewhere_are_refused(tmp_path):
    assert plan_of(_cfg(tmp_path)).loop == "anakin"
    with pytest.raises(ConfigError, match="needs a JAX env"):
        check(_cfg(tmp_path, env=EnvConfig(id="CartPole-v1"), seeds=(1, 2)))
    with pytest.raises(ConfigError, match="overlap_collection"):
        check(_cfg(tmp_path, trainer=TrainerConfig(overlap_collection=True)))
    assert [c.trial for c in seed_trials(_cfg(tmp_path, seeds=(3, 4)))] == ["t__seed=3", "t__seed=4"]


def test_ppo_learns_cartpole_in_the_compiled_loop(tmp_path):
    result = train(_cfg(tmp_path, total_env_steps=120_000))
    assert result.metrics[-1]["episode_return"] > 150  # random play: ~22


def test_seeds_in_one_program_equal_each_seed_alone(tmp_path):
    train(_cfg(tmp_path, trial="pack", seeds=(1, 2)))
    train(_cfg(tmp_path, trial="alone", seed=2))
    train(_cfg(tmp_path, trial="vmapped", seeds=(1, 2), seeds_batch=2))
    packed, alone = _metrics(tmp_path / "anakin" / "pack__seed=2"), _metrics(tmp_path / "anakin" / "alone")
    vmapped = _metrics(tmp_path / "anakin" / "vmapped__seed=2")
    assert len(packed) == len(alone) == len(vmapped) == 6
    keys = ("episode_return", "policy_loss", "value_loss", "entropy")
    for a, b, v in zip(packed, alone, vmapped):
        assert [a[k] for k in keys] == [b[k] for k in keys]  # one after another in the program: bit for bit
        for key in keys:  # vmapped: to float tolerance
            np.testing.assert_allclose(v[key], b[key], rtol=1e-4, atol=1e-4)
    seed1 = _metrics(tmp_path / "anakin" / "pack__seed=1")
    assert seed1[-1]["policy_loss"] != packed[-1]["policy_loss"]  # two trials, not one copied
    assert json.loads((tmp_path / "anakin" / "pack__seed=1" / "config.json").read_text())["seed"] == 1


def test_resume_continues_exactly_with_the_env_state(tmp_path):
    no_anneal = TrainerConfig(num_minibatches=4, update_epochs=4, anneal_lr=False)  # lr independent of the budget
    full = _cfg(tmp_path, trial="full", total_env_steps=512 * 8, trainer=no_anneal)
    train(full)
    half = _cfg(tmp_path, trial="half", total_env_steps=512 * 4, trainer=no_anneal,
                checkpoint=dataclasses.replace(full.checkpoint, every_updates=4))
    train(half)
    train(dataclasses.replace(half, total_env_steps=512 * 8), resume=True)
    a, b = _metrics(tmp_path / "anakin" / "full"), _metrics(tmp_path / "anakin" / "half")
    assert [r["update"] for r in b] == list(range(1, 9))
    for x, y in zip(a, b):
        for key in ("policy_loss", "value_loss", "entropy"):
            np.testing.assert_allclose(x[key], y[key], rtol=1e-4, atol=1e-5)
        assert x.get("episode_return") == pytest.approx(y.get("episode_return"), rel=1e-5)


def test_a_stop_with_a_call_in_flight_checkpoints_what_its_lines_say(tmp_path, monkeypatch):
    """Each call is sent before the previous call's lines are written; a stop (here the timeout) with a call in
    flight waits for it: its lines are written and the final checkpoint holds its state, so a resume continues as
    the uninterrupted run."""
    import srljax.loops.anakin as loop

    no_anneal = TrainerConfig(num_minibatches=4, update_epochs=4, anneal_lr=False)
    train(_cfg(tmp_path, trial="full", total_env_steps=512 * 8, trainer=no_anneal))
    monkeypatch.setattr(loop, "CALL_SECONDS", 1e-9)  # one iteration per call: calls overlap the lines before them
    ticks = iter(range(10**6))  # the loop's clock: the deadline passes at its 5th look, 4 calls sent
    monkeypatch.setattr(loop, "time", SimpleNamespace(time=lambda: float(next(ticks)), perf_counter=time.perf_counter))
    cut = _cfg(tmp_path, trial="cut", total_env_steps=512 * 8, trainer=no_anneal, timeout_seconds=4)
    assert train(cut).stopped_by == "timeout"
    assert [r["update"] for r in _metrics(tmp_path / "anakin" / "cut")] == [1, 2, 3, 4]
    monkeypatch.undo()
    train(dataclasses.replace(cut, timeout_seconds=3600), resume=True)
    a, b = _metrics(tmp_path / "anakin" / "full"), _metrics(tmp_path / "anakin" / "cut")
    assert [r["update"] for r in b] == list(range(1, 9))
    for x, y in zip(a, b):
        for key in ("policy_loss", "value_loss", "entropy"):
            np.testing.assert_allclose(x[key], y[key], rtol=1e-4, atol=1e-5)


def test_dqn_learns_cartpole_with_the_replay_on_the_device(tmp_path):
    from srljax.config import DQNConfig, ReplayConfig

    cfg = _cfg(tmp_path, total_env_steps=60_000, env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8),
               algo=DQNConfig(batch_size=128, replay_ratio=12.8, learning_starts=5_000, double_q=False, loss="mse",
                              target_update_every=50, eps_end=0.05, exploration_fraction=0.3, updates_per_call=16,
                              replay=ReplayConfig(capacity=10_000)),
               trainer=TrainerConfig(lr=2.5e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                                     update_epochs=1),
               log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=100))
    assert plan_of(cfg).loop == "anakin"
    result = train(cfg)
    assert result.env_steps == 60_000
    assert result.metrics[-1]["episode_return"] > 100  # random play: ~22


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_sac_and_td3_learn_pendulum_in_the_compiled_loop(algo):
    from srljax.config import load_file
    from srljax.config.tree import apply_overrides

    algo_keys = [] if algo == "sac" else ["algo=td3", "algo.learning_starts=1000", "algo.hidden_sizes=64,64",
                                          "algo.replay.capacity=20000", "algo.updates_per_call=8"]
    cfg = apply_overrides(load_file("configs/gymnax_pendulum_sac.py"), [*algo_keys, "log.wandb=disabled",
                                                                         "total_env_steps=12000"])
    import tempfile

    cfg = dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, run_root=tempfile.mkdtemp()))
    assert train(cfg).metrics[-1]["episode_return"] > -400  # random play: about -1,200


def test_a_sweep_packs_the_seeds_of_a_jax_env_trial_into_one_launch(tmp_path):
    from launch.sweep import Sweep
    from launch.sweep.local import command, packed
    from launch.sweep.trials import resolve_trials

    def plan(config: str) -> list:
        sweep = Sweep(configs=[config], grid={"trainer.lr": [1e-3, 3e-4]}, seeds=[1, 2, 3], name="s",
                      overrides=[f"log.run_root={tmp_path}", "total_env_steps=2048"])
        return packed([(p, ()) for p in resolve_trials(sweep)])

    runs = plan("configs/gymnax_cartpole_ppo.py")
    assert len(runs) == 2  # one launch per grid point
    pack, _ = runs[0]
    assert pack.spec.name == "gymnax_cartpole_ppo__trainer.lr=0.001" and pack.cfg.seeds == (1, 2, 3)
    assert command(pack)[-1] == "seeds=[1,2,3]"
    # each seed's folder is the one the sweep names for that trial (its report and --resume find them there)
    assert [t.trial for t in seed_trials(pack.cfg)] == [f"{pack.spec.name}__seed={s}" for s in (1, 2, 3)]
    assert len(plan("configs/cartpole_ppo.py")) == 6  # envpool trials run one by one
