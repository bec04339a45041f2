"""Spaces users bring: Dict observations, channels-last frames, MultiDiscrete actions, networks of their own,
and the one clear refusal (exit 2) of what an algorithm or its network cannot take."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import envpool
import flax.linen as nn
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from algos.distributions import categorical_entropy, categorical_log_prob, multi_categorical
from algos.networks import make_actor_critic, make_q_network
from envs.spaces import ObsConverter, spec_from_spaces, unflatten_obs
from launch.cli import run_cli
from srljax.config import DQNConfig, EnvConfig, PPOConfig

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")
ROOT = Path(__file__).resolve().parents[1]
FOOTBALL = "gfootball/academy_empty_goal_close-v1"


def _never(cfg, resume=False) -> int:
    raise AssertionError("a config that does not fit must not launch")


def _refused(capsys, *argv: str) -> list[str]:
    """Launch through the CLI; assert exit 2 and return the listed problems."""
    code = run_cli(_never, [*argv, "log.wandb=disabled"], "launch", "")
    err = capsys.readouterr().err
    assert code == 2, err
    return [line for line in err.splitlines() if line.startswith("  - ")]


def test_dm_control_dict_observation_arrives_flattened_in_key_order():
    env = envs.make(EnvConfig(id="CheetahRun-v1", num_envs=2), seed=3)
    raw = envpool.make("CheetahRun-v1", env_type="gymnasium", num_envs=2, seed=3)
    try:
        spec = env.spec
        assert spec.obs_keys == ("position", "velocity") and spec.obs_key_sizes == (8, 9)
        assert spec.obs_shape == (17,) and spec.obs_dtype == "float32" and spec.action_kind == "continuous"
        ts, (obs, _) = env.reset(), raw.reset()
        np.testing.assert_allclose(ts.obs, np.concatenate([obs["position"], obs["velocity"]], 1).astype(np.float32))
        parts = unflatten_obs(ts.obs, spec)
        np.testing.assert_allclose(parts["velocity"], obs["velocity"].astype(np.float32))
        action = np.full((2, 6), 0.3, np.float32)
        obs, *_ = raw.step(action)
        np.testing.assert_allclose(env.step(action).obs[:, 8:], obs["velocity"].astype(np.float32), rtol=1e-6)
    finally:
        env.close()


def test_nested_dict_with_discrete_leaf_is_one_hot():
    space = gymnasium.spaces.Dict({
        "direction": gymnasium.spaces.Discrete(4),
        "inner": gymnasium.spaces.Dict({"image": gymnasium.spaces.Box(0, 255, (2, 2, 3), np.uint8)}),
    })
    spec = spec_from_spaces("T", space, gymnasium.spaces.Discrete(3), 2, 2, 0)
    assert spec.obs_keys == ("direction", "inner/image") and spec.obs_key_sizes == (4, 12) and spec.obs_shape == (16,)
    obs = {"direction": np.array([2, 0]), "inner": {"image": np.arange(24, dtype=np.uint8).reshape(2, 2, 2, 3)}}
    flat = ObsConverter(space)(obs)
    assert flat.dtype == np.float32 and flat.shape == (2, 16)
    np.testing.assert_array_equal(flat[:, :4], [[0, 0, 1, 0], [1, 0, 0, 0]])
    np.testing.assert_array_equal(flat[1, 4:], np.arange(12, 24))
    np.testing.assert_array_equal(ObsConverter(space).one({"direction": 2, "inner": {"image": obs["inner"]["image"][0]}}),
                                  flat[0])


def test_minigrid_dict_observation_builds_ppo_and_dqn():
    env = envs.make(EnvConfig(id="MiniGrid-DoorKey-5x5-v0", num_envs=2), seed=0)
    try:
        spec, ts = env.spec, env.reset()
    finally:
        env.close()
    assert spec.obs_keys == ("direction", "image", "mission") and spec.obs_key_sizes == (4, 147, 96)
    assert ts.obs.shape == (2, 247) and np.all(ts.obs[:, :4].sum(1) == 1)
    for net in (make_actor_critic(PPOConfig(), spec), make_q_network(DQNConfig(), spec)):
        params = net.init(jax.random.PRNGKey(0), jnp.asarray(ts.obs))
        assert jax.tree.leaves(params)[0].size > 0


def test_football_frames_are_channels_last_and_the_cnn_sees_them_whole():
    env = envs.make(EnvConfig(id=FOOTBALL, num_envs=1), seed=0)
    try:
        spec, ts = env.spec, env.reset()
    finally:
        env.close()
    assert spec.obs_shape == (72, 96, 4) and spec.image_channels == "last" and spec.num_actions == 19
    params = make_actor_critic(PPOConfig(), spec).init(jax.random.PRNGKey(0), jnp.asarray(ts.obs))
    dense = params["params"]["torso"]["Dense_0"]["kernel"]
    assert dense.shape == (64 * 5 * 8, 512)  # 72x96 -> 17x23 -> 7x10 -> 5x8 after the three convs
    # forced channels-first, the same frames are 96x4 pixels: the network is refused, not built with 0 inputs
    with pytest.raises(ValueError, match="image_channels=last"):
        make_actor_critic(PPOConfig(), dataclasses.replace(spec, image_channels="first"))


def test_ambiguous_image_needs_a_declared_channel_axis():
    box = gymnasium.spaces.Box(0, 255, (10, 10, 10), np.uint8)
    with pytest.raises(ValueError, match="env.image_channels=first"):
        spec_from_spaces("T", box, gymnasium.spaces.Discrete(2), 1, 1, 0)
    assert spec_from_spaces("T", box, gymnasium.spaces.Discrete(2), 1, 1, 0, image_channels_declared="last").image_channels == "last"


def test_multi_categorical_matches_independent_categoricals():
    dist = multi_categorical((3, 2))
    logits = jax.random.normal(jax.random.PRNGKey(0), (5, 5))
    action = dist.sample(jax.random.PRNGKey(1), logits)
    assert action.shape == (5, 2) and action.dtype == jnp.int32
    assert bool(jnp.all(action[:, 0] < 3)) and bool(jnp.all(action[:, 1] < 2))
    expected = categorical_log_prob(logits[:, :3], action[:, 0]) + categorical_log_prob(logits[:, 3:], action[:, 1])
    np.testing.assert_allclose(dist.log_prob(logits, action), expected, rtol=1e-6)
    np.testing.assert_allclose(dist.entropy(logits),
                               categorical_entropy(logits[:, :3]) + categorical_entropy(logits[:, 3:]), rtol=1e-6)
    np.testing.assert_array_equal(dist.mode(logits), jnp.stack([logits[:, :3].argmax(1), logits[:, 3:].argmax(1)], 1))


def test_ppo_learns_multi_discrete_cue_choices(tmp_path: Path):
    """Three sub-actions of four values, each to match its own cue: random earns 0.25; mixed-up sub-action logits
    cannot pass 0.5."""
    from launch.cli import parse
    from srljax.loops.train import train

    cfg = parse([str(ROOT / "configs/cartpole_ppo.py"), "env.factory=envs.probe:make_cue_choices",
                 "total_env_steps=40000", f"log.run_root={tmp_path}", "log.wandb=disabled"])
    assert cfg.env.factory
    returns = [m["episode_return"] for m in train(cfg).metrics if m.get("episode_return") is not None]
    assert np.mean(returns[-3:]) >= 0.7, returns


def test_bad_spaces_are_refused_before_launch_with_one_message(capsys):
    ppo, dqn = str(ROOT / "configs/cartpole_ppo.py"), str(ROOT / "configs/cartpole_dqn.py")
    (msg,) = _refused(capsys, ppo, f"env.id={FOOTBALL}", "env.image_channels=first")
    assert "does not fit" in msg and "96x4 pixels" in msg and "env.image_channels=last" in msg
    (msg,) = _refused(capsys, dqn, "env.factory=envs.probe:make_cue_choices")
    assert "algo=dqn takes discrete actions" in msg and "MultiDiscrete actions [4, 4, 4]" in msg
    (msg,) = _refused(capsys, ppo, "env.id=CartpoleSwingup-v1", "algo.network=cnn")
    assert "needs image observations" in msg
    (msg,) = _refused(capsys, ppo, "env.id=CartpoleSwingup-v1", "algo=tests.test_spaces:FlatOnlyConfig")
    assert "does not take Dict observations" in msg and "position, velocity" in msg
    (msg,) = _refused(capsys, ppo, "algo.network=examples.custom_torso:ResidualTorso", "algo.network_options.depth=3")
    assert "depth" in msg and "blocks" in msg and "width" in msg


@dataclasses.dataclass(frozen=True)
class FlatOnlyConfig(PPOConfig):
    """A user's algorithm config that states it takes array observations only (``algos/fit.py``)."""

    name: str = "tests.test_spaces:FlatOnlyConfig"
    dict_obs = False


# -- networks of your own -------------------------------------------------------------------------------------------

TORSO = "examples.custom_torso:ResidualTorso"


def test_custom_torso_under_every_built_in_algorithm():
    """The user's module sits under PPO/APPO, IMPALA (feed-forward and LSTM), DQN and MAPPO, with its options."""
    from algos.factory import make
    from srljax.config import Experiment, IMPALAConfig, MAPPOConfig, TrainerConfig

    cartpole = envs.make(EnvConfig(id="CartPole-v1", num_envs=2), seed=0)
    lbf = envs.make(EnvConfig(id="LevelBasedForaging-v0", num_envs=2), seed=0)
    options = {"width": 24, "blocks": 1}
    cases = [
        (PPOConfig(network=TORSO, network_options=options), cartpole),
        (PPOConfig(network=TORSO, network_options=options, vtrace=True), cartpole),
        (IMPALAConfig(network=TORSO, network_options=options), cartpole),
        (IMPALAConfig(network=TORSO, network_options=options, lstm_size=8), cartpole),
        (DQNConfig(network=TORSO, network_options=options), cartpole),
        (MAPPOConfig(network=TORSO, network_options=options), lbf),
    ]
    try:
        for algo_cfg, env in cases:
            trainer = TrainerConfig(num_minibatches=1, update_epochs=1)
            cfg = Experiment(env=EnvConfig(id=env.spec.id, num_envs=2), algo=algo_cfg, trainer=trainer)
            state = make(cfg, env.spec).init(jax.random.PRNGKey(0))
            names = {"/".join(str(getattr(k, "key", k)) for k in path)
                     for path, _ in jax.tree_util.tree_flatten_with_path(state.params)[0]}
            # the torso's own layers, at the asked width, are in the params (one shared torso, or actor + critic)
            assert any("LayerNorm" in n for n in names), (type(algo_cfg).__name__, sorted(names)[:6])
            widths = {leaf.shape[-1] for path, leaf in jax.tree_util.tree_flatten_with_path(state.params)[0]
                      if "Dense_0" in jax.tree_util.keystr(path) and "kernel" in jax.tree_util.keystr(path)}
            assert 24 in widths, (type(algo_cfg).__name__, widths)
    finally:
        cartpole.close()
        lbf.close()


class _NoFlatten(nn.Module):
    """A torso that forgets to flatten: returns [B, 2, 3]."""

    def __call__(self, obs):
        return jnp.zeros((obs.shape[0], 2, 3))


def test_a_torso_returning_the_wrong_shape_is_named():
    spec = envs.make(EnvConfig(id="CartPole-v1", num_envs=1), seed=0).spec
    net = make_actor_critic(PPOConfig(network="tests.test_spaces:_NoFlatten"), spec)
    with pytest.raises(ValueError, match="returns features \\[B, F\\]"):
        net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))


def test_custom_torso_in_the_distributed_layout_with_remote_inference(tmp_path):
    """The policy worker and the trainer build the user's module from the config alone."""
    from launch.threads import run_threads
    from srljax.config import apply_overrides, load_file

    cfg = apply_overrides(load_file(ROOT / "configs/cartpole_ppo_distributed.py"), [
        f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "trial=t0", "algo.num_steps=32",
        "trainer.num_minibatches=2", "trainer.update_epochs=1", f"total_env_steps={2 * 4 * 32 * 4}",
        f"algo.network={TORSO}", "algo.network_options.width=16"])
    assert cfg.layout.inference == "remote"
    result = run_threads(cfg)
    assert result.exit_code == 0 and result.reason == "done", result.message
    assert result.worker_metrics("policy", 0)[-1]["rows"] > 0
    assert result.metrics[-1]["update"] == cfg.num_updates and np.isfinite(result.metrics[-1]["loss"])


@pytest.mark.parametrize("argv", [
    ["configs/football_ppo.py"],
    ["configs/football_ppo_distributed.py", "env.id=gfootball/academy_3_vs_1_with_keeper-v1"],
    ["configs/football_ppo.py", "env.id=gfootball/academy_run_to_score_with_keeper-v1"],
    ["configs/dmc_ppo.py"],
    ["configs/dmc_ppo.py", "env.id=CheetahRun-v1"],
    ["configs/dmc_ppo.py", "env.id=WalkerWalk-v1"],
    ["configs/minigrid_ppo.py"],
    ["examples/cartpole_custom_torso.py"],
], ids=lambda argv: " ".join(a.split("/")[-1] for a in argv))
def test_shipped_env_configs_pass_the_launchers_checks(argv, tmp_path):
    from launch.cli import parse

    cfg = parse([str(ROOT / argv[0]), *argv[1:], f"log.run_root={tmp_path}"])
    assert cfg.env.id and cfg.total_env_steps > 0
