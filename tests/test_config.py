"""Config tree: validation messages with arithmetic, overrides, files, JSON round trip."""

import dataclasses
import json

import pytest

from launch.cli import parse
from srljax.config import (
    ConfigError,
    EnvConfig,
    Experiment,
    LayoutConfig,
    TrainerConfig,
    apply_overrides,
    from_dict,
    problems,
    to_dict,
    validate,
    write_json,
)


def test_defaults_are_valid_and_timeout_is_three_days():
    cfg = validate(Experiment())
    assert cfg.timeout_seconds == 3 * 24 * 3600


def test_every_problem_reported_at_once_with_arithmetic():
    cfg = Experiment(
        total_env_steps=100,
        env=EnvConfig(num_envs=8, batch_size=3),
        trainer=TrainerConfig(num_minibatches=3, lr=-1.0),
    )
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    text = str(err.value)
    assert "batch 1024 (8 envs x 128 steps) is not divisible by trainer.num_minibatches=3 (1024 % 3 = 1)" in text
    assert "env.num_envs=8 is not a multiple of env.batch_size=3" in text
    assert "trainer.lr=-1.0 must be > 0" in text
    assert "total_env_steps=100 is less than one update's batch 1024" in text
    assert len(err.value.problems) == 4


def test_devices_must_divide_minibatch():
    cfg = Experiment(trainer=TrainerConfig(devices=3))  # 8 envs x 128 steps / 4 minibatches = 256
    msgs = problems(cfg)
    assert any("minibatch 256 (batch 1024 / 4 minibatches) is not divisible by 3 trainer devices" in m for m in msgs)


def test_overrides_parse_types_and_report_unknown_keys_together():
    cfg = apply_overrides(
        Experiment(),
        ["total_env_steps=5e4", "trainer.lr=1e-4", "env.id=Pong-v5", "algo.hidden_sizes=32,32", "algo.norm_adv=false"],
    )
    assert (cfg.total_env_steps, cfg.trainer.lr, cfg.env.id) == (50_000, 1e-4, "Pong-v5")
    assert cfg.algo.hidden_sizes == (32, 32) and cfg.algo.norm_adv is False
    free = apply_overrides(Experiment(), ["algo.network_options.channels=[32, 64]", "env.options.game=connect_four",
                                          "env.options.size=[]", "env.options.scale=0.5"])  # free-form: by their text
    assert free.algo.network_options == {"channels": [32, 64]}
    assert free.env.options == {"game": "connect_four", "size": [], "scale": 0.5}
    with pytest.raises(ConfigError) as err:
        apply_overrides(Experiment(), ["trainer.lrr=1", "env.num_envs=many", "layout.mode=cluster", "nokey"])
    text = str(err.value)
    assert "unknown config key 'trainer.lrr'; did you mean trainer.lr?" in text
    assert "env.num_envs='many': expected an integer" in text
    assert "layout.mode='cluster': expected one of single, distributed" in text
    assert "override 'nokey' is not key=value" in text


def test_cli_names_default_to_file_stem_and_timestamp(tmp_path):
    cfg = parse(["configs/cartpole_ppo.py", "total_env_steps=20000"])
    assert cfg.name == "cartpole_ppo" and cfg.trial[:2] == "20" and cfg.total_env_steps == 20_000
    cfg = parse(["configs/cartpole_ppo.py", "-e", "mine", "-f", "t1", "trainer.lr=1e-3"])
    assert (cfg.name, cfg.trial, cfg.trainer.lr) == ("mine", "t1", 1e-3)


def test_config_file_errors_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        parse([str(tmp_path / "missing.py")])
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(ConfigError, match=r"must define `def experiment\(\) -> Experiment`"):
        parse([str(bad)])


def test_json_round_trip(tmp_path):
    cfg = dataclasses.replace(Experiment(), name="x", trial="y")
    path = write_json(cfg, tmp_path / "config.json")
    assert from_dict(json.loads(path.read_text())) == cfg
    assert to_dict(cfg)["trainer"]["lr"] == cfg.trainer.lr


def test_shipped_configs_validate():
    for path in ["configs/cartpole_ppo.py", "configs/atari_ppo.py", "configs/mujoco_ppo.py"]:
        cfg = parse([path])
        assert cfg.name == path.split("/")[-1][:-3]


def test_a_run_too_long_for_the_int32_step_count_is_refused():
    # 1e11 env steps of the default batch (128 x 8) x 4 epochs x 4 minibatches: 1.56e9 gradient steps fit
    assert problems(dataclasses.replace(Experiment(), total_env_steps=10**11)) == []
    # ... 4x as many do not (the learning-rate schedule would overflow inside the compiled update)
    found = problems(dataclasses.replace(Experiment(), total_env_steps=4 * 10**11))
    assert len(found) == 1 and "overflow the optimiser's int32 step count" in found[0], found


@pytest.mark.parametrize("override, expect", [
    ("timeout_seconds=nan", "timeout_seconds=nan must be a finite number"),
    ("layout.hang_seconds=nan", "layout.hang_seconds=nan must be a finite number"),
    ("layout.stall_seconds=nan", "layout.stall_seconds=nan must be a finite number"),
    ("layout.heartbeat_timeout_seconds=nan", "layout.heartbeat_timeout_seconds=nan must be a finite number"),
    ("trainer.lr=inf", "trainer.lr=inf must be a finite number"),
    ("algo.replay.beta0=nan", "algo.replay.beta0=nan must be a finite number"),
    ("env.max_episode_steps=-3", "env.max_episode_steps=-3 must be >= 0"),
    ("algo.hidden_sizes=()", "algo.hidden_sizes=() needs at least one layer"),
])
def test_nan_infinite_and_out_of_range_values_get_one_message_each(override, expect):
    """A check written ``x <= 0`` passes NaN: every float of the tree is checked for finiteness first, so a NaN
    watchdog cannot switch itself off; one message per bad value."""
    base = Experiment(layout=LayoutConfig(mode="distributed"), trainer=TrainerConfig(batch_envs=8))
    if override.startswith("algo.replay"):
        base = apply_overrides(base, ["algo=dqn"])
    found = problems(apply_overrides(base, [override]))
    assert [p for p in found if override.split("=")[0] in p] == [p for p in found if expect in p], found
    assert len([p for p in found if expect in p]) == 1, found
