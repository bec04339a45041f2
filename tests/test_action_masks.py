"""Legal-action masks of single-agent Dict observations (``action_mask``): spaces, networks, acting, learning."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import gymnasium
import jax
import numpy as np
import pytest

import algos
from algos.fit import spec_problems
from envs.probe import MaskedChoices
from envs.spaces import spec_from_spaces
from srljax.config import (
    DQNConfig,
    EnvConfig,
    Experiment,
    IMPALAConfig,
    LogConfig,
    PPOConfig,
    R2D2Config,
    ReplayConfig,
    TrainerConfig,
)
from srljax.loops.train import train

QUIET = LogConfig(wandb="disabled", progress="lines", log_every=20)


def test_action_mask_key_is_found_in_the_flattened_observation():
    space = gymnasium.spaces.Dict({"board": gymnasium.spaces.Box(0, 1, (3, 2)),
                                   "action_mask": gymnasium.spaces.MultiBinary(5),
                                   "turn": gymnasium.spaces.Discrete(2)})
    spec = spec_from_spaces("Game", space, gymnasium.spaces.Discrete(5), 2, 2, 0)
    assert spec.action_mask and spec.obs_keys == ("action_mask", "board", "turn")  # gymnasium sorts Dict keys
    assert spec.legal_actions == (0, 5)
    with pytest.raises(ValueError, match="'action_mask' \\(5 flags\\).*Discrete action space of 5"):
        spec_from_spaces("Game", space, gymnasium.spaces.Discrete(4), 2, 2, 0)
    plain = spec_from_spaces("Plain", gymnasium.spaces.Box(0, 1, (3,)), gymnasium.spaces.Discrete(4), 2, 2, 0)
    assert plain.legal_actions is None


ALGOS = {
    "ppo": PPOConfig(hidden_sizes=(16,), normalize_obs=True),
    "ppo_lstm": PPOConfig(hidden_sizes=(16,), lstm_size=8),
    "impala": IMPALAConfig(hidden_sizes=(16,)),
    "dqn": DQNConfig(hidden_sizes=(16,)),
    "r2d2": R2D2Config(hidden_sizes=(16,), lstm_size=8),
}


@pytest.mark.parametrize("name", list(ALGOS))
def test_acting_never_picks_an_illegal_action(name):
    """Untrained networks, sampling (epsilon 1 for the Q-learners: uniformly random legal actions) and greedy."""
    env = MaskedChoices(num_envs=64, length=8, seed=3)
    algo = algos.make(Experiment(env=EnvConfig(factory="envs.probe:make_masked_choices"), algo=ALGOS[name]), env.spec)
    pp = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
    rng = np.random.default_rng(0)
    obs = np.zeros((64, 6), np.float32)
    for i in range(64):
        obs[i, rng.choice(6, size=int(rng.integers(1, 6)), replace=False)] = 1.0
    state = jax.tree.map(np.asarray, algo.initial_actor_state(64))
    if isinstance(state, dict) and "epsilon" in state:
        state = {**state, "epsilon": np.ones(64, np.float32)}
    first = np.ones(64, bool)
    seen = set()
    for k in range(20):
        for act in (algo.act, algo.act_deterministic):
            action, _, _ = act(pp, obs, state, first, jax.random.PRNGKey(k))
            action = np.asarray(action)
            assert np.all(obs[np.arange(64), action] == 1.0), name
            seen.update(zip(range(64), action.tolist()))
    assert len({a for _, a in seen}) == 6  # every action is picked somewhere it is legal


def test_normalised_observations_keep_the_flags_raw():
    from algos.actor_critic import ActorCriticPolicy
    from algos.normalizers import init_norm

    spec = MaskedChoices(num_envs=2, length=8).spec
    ac = ActorCriticPolicy.build(PPOConfig(normalize_obs=True), spec, value_extra=True)
    norm = init_norm(spec.obs_shape, obs=True, reward=False).obs
    norm = jax.tree.map(lambda x: x + 3.0, norm)  # a mean far from the flags
    obs = np.eye(6, dtype=np.float32)[:2]
    np.testing.assert_array_equal(np.asarray(ac.prep(obs, norm)), obs)


def masked_experiment(tmp_path, algo_cfg, trial: str, steps: int) -> Experiment:
    return Experiment(name="masked", trial=trial, seed=1, total_env_steps=steps,
                      env=EnvConfig(factory="envs.probe:make_masked_choices", num_envs=8, max_episode_steps=8),
                      algo=algo_cfg, trainer=TrainerConfig(lr=3e-3, anneal_lr=False, num_minibatches=2, update_epochs=4),
                      log=dataclasses.replace(QUIET, run_root=str(tmp_path), window=32))


def test_ppo_and_dqn_learn_the_best_legal_action(tmp_path):
    """Random legal play earns ~2.6 of 8; an illegal action would end the run with an error. Seed 1: PPO 7.9,
    DQN 7.8 (~25 s together on 2 cores)."""
    ppo = train(masked_experiment(tmp_path, PPOConfig(num_steps=16, hidden_sizes=(32,), ent_coef=0.0), "ppo", 16_000))
    dqn_cfg = DQNConfig(batch_size=64, replay_ratio=8.0, learning_starts=1_000, hidden_sizes=(32,), gamma=0.9,
                        target_update_every=50, exploration_fraction=0.3, eps_end=0.02, updates_per_call=4,
                        replay=ReplayConfig(capacity=10_000))
    cfg = masked_experiment(tmp_path, dqn_cfg, "dqn", 16_000)
    dqn = train(dataclasses.replace(cfg, trainer=TrainerConfig(lr=1e-3, num_minibatches=1, update_epochs=1)))
    returns = (ppo.metrics[-1]["episode_return"], dqn.metrics[-1]["episode_return"])
    print(f"masked choices: ppo {returns[0]:.2f}, dqn {returns[1]:.2f}")
    assert min(returns) >= 7.0, returns


def test_an_algorithm_that_ignores_masks_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Mine:
        name: str = "mine:Mine"
        action_masks: ClassVar[bool] = False

    spec = MaskedChoices(num_envs=2, length=8).spec
    assert spec_problems(Mine(), spec) == [
        "algo=mine:Mine does not apply action masks, and MaskedChoices's observation flags its legal actions (its "
        "'action_mask' key): use algo=ppo, impala, dqn or r2d2, which never pick an illegal action"]
    assert spec_problems(PPOConfig(), spec) == [] and spec_problems(DQNConfig(), spec) == []
