"""The user-written algorithm of examples/reinforce.py: selected by config file, command line and JSON; learns."""

from __future__ import annotations

import dataclasses
import json

import pytest

from examples import cartpole_reinforce
from examples.reinforce import ReinforceConfig
from srljax.config import ConfigError, Experiment, LogConfig, apply_overrides, from_dict, load_file, to_dict, validate


def test_user_algorithm_config_round_trips_and_is_picked_on_the_command_line():
    cfg = load_file("examples/cartpole_reinforce.py")
    back = from_dict(json.loads(json.dumps(to_dict(cfg))))  # what a distributed worker receives
    assert isinstance(back.algo, ReinforceConfig) and back.algo == ReinforceConfig(**dataclasses.asdict(cfg.algo))
    picked = apply_overrides(Experiment(), ["algo=examples.reinforce:ReinforceConfig", "algo.gamma=0.9"])
    assert isinstance(picked.algo, ReinforceConfig) and picked.algo.gamma == 0.9
    with pytest.raises(ConfigError, match="set trainer.update_epochs=1 and trainer.num_minibatches=1"):
        validate(picked)  # the default trainer takes 4 epochs: the user config's own problems() says so
    with pytest.raises(ConfigError, match="cannot import module 'examples.nope'"):
        apply_overrides(Experiment(), ["algo=examples.nope:Config"])


def test_user_reinforce_learns_cartpole(tmp_path):
    """100k env steps (~20 s): a random policy scores ~22; this run reaches ~170 (seed 1)."""
    from srljax.loops.train import train

    cfg = dataclasses.replace(cartpole_reinforce.experiment(), name="reinforce", trial="learn", total_env_steps=100_000,
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", progress="lines"))
    result = train(cfg)
    returns = [m["episode_return"] for m in result.metrics if "episode_return" in m]
    assert max(returns[-20:]) >= 100, returns[-10:]
