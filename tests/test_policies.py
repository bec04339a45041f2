"""Several policies in one experiment (issue 12, part 3): config checks, the split of a batch by policy and the
merge of their actions, checkpoints across layouts, and (slow) the two-policy distributed config learning."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import algos
import envs
from algos.mappo_config import MAPPOConfig
from algos.multi_policy import make_policy_algorithm, merge_actions, policy_rows, policy_spec, split_trajectory
from envs.multi_agent import ENVPOOL_NUM_AGENTS
from srljax.config import (
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    PoliciesConfig,
    PolicyConfig,
    TrainerConfig,
    from_dict,
    load_file,
    to_dict,
)
from srljax.config.policies import policy_experiment
from srljax.learning.policies import load_policy_state, restore_policies
from srljax.learning.rollout import SegmentBuilder
from srljax.prepare import problems  # the tree, the graph, the env fit and the load= folders
from srljax.system.acting.policy_streams import PolicySender
from srljax.system.shell.common import checked_trajectory
from srljax.types import EnvSpec

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")
ROOT = Path(__file__).resolve().parents[1]
LBF = "LevelBasedForaging-v0"


def two_policies(agents: tuple[str, ...] = ("alpha", "beta"), env_id: str = LBF, **kw) -> Experiment:
    return Experiment(env=EnvConfig(id=env_id, num_envs=4), algo=MAPPOConfig(num_steps=8, hidden_sizes=(16,)),
                      trainer=TrainerConfig(num_minibatches=2, update_epochs=1),
                      policies=PoliciesConfig(named=(PolicyConfig("alpha"), PolicyConfig("beta")), agents=agents), **kw)


def policy_lines(cfg: Experiment) -> list[str]:
    return [p for p in problems(cfg) if "polic" in p or "agent" in p]


# -- config -------------------------------------------------------------------------------------------------------
def test_default_is_one_shared_policy_and_every_existing_config_passes():
    assert not Experiment().policies.enabled and problems(two_policies()) == []
    for name in ("lbf_mappo.py", "lbf_ippo.py", "cartpole_ppo.py"):
        assert not [p for p in problems(load_file(ROOT / "configs" / name)) if "polic" in p]


@pytest.mark.parametrize("agents, env_id, expect", [
    (("alpha", "beta"), "RobotWarehouse-v0", "agents [2, 3] of RobotWarehouse-v0 (4 agents) are mapped to no policy"),
    (("alpha", "alpha"), LBF, "policy 'beta' has no agents"),
    (("alpha", "beta", "gamma", "beta"), "RobotWarehouse-v0",
     "policies.agents names policy 'gamma' (agents [2]), which policies.named does not define; known: alpha, beta"),
])
def test_bad_agent_tables_are_refused_with_one_clear_message_each(agents, env_id, expect):
    found = policy_lines(two_policies(agents, env_id))
    assert len(found) == 1 and expect in found[0], found


def test_other_refusals_name_the_key():
    frozen = dataclasses.replace(two_policies(), policies=PoliciesConfig(
        named=(PolicyConfig("alpha"), PolicyConfig("beta", frozen=True)), agents=("alpha", "beta")))
    assert any("frozen but has no checkpoint" in p for p in problems(frozen))
    odd = dataclasses.replace(two_policies(), policies=PoliciesConfig(
        named=(PolicyConfig("alpha"), PolicyConfig("beta", algo=MAPPOConfig(num_steps=16))), agents=("alpha", "beta")))
    assert any("policy 'beta': batches of 4 columns x 16 steps but the experiment's are 4 x 8" in p
               for p in problems(odd))
    buffers = two_policies(layout=LayoutConfig(mode="distributed", num_buffer_workers=1))
    assert any("layout.num_buffer_workers=1" in p for p in problems(buffers))


def test_central_critic_without_state_or_views_is_refused():
    """The fourth bad input already has a check (``algos.mappo.spec_problems``, when the env is built)."""
    from algos.mappo import spec_problems

    spec = EnvSpec(id="viewless", obs_shape=(2, 3), obs_dtype="float32", action_kind="discrete", num_actions=3,
                   action_shape=(2,), num_agents=2, action_mask=True)
    (found,) = spec_problems(spec, MAPPOConfig(critic="central"))
    assert "no global state and no agent views" in found and "critic='local'" in found


def test_config_round_trips_through_json_and_agent_counts_match_the_envs():
    cfg = two_policies()
    cfg = dataclasses.replace(cfg, policies=dataclasses.replace(cfg.policies, named=(
        PolicyConfig("alpha", trainer=TrainerConfig(lr=1e-4)), PolicyConfig("beta", algo=MAPPOConfig(critic="local")))))
    back = from_dict(json.loads(json.dumps(to_dict(cfg))))
    assert back == cfg and isinstance(back.policies.named[1].algo, MAPPOConfig)
    sub = policy_experiment(cfg, "alpha")
    assert sub.trainer.lr == 1e-4 and sub.run_dir == cfg.run_dir / "policies" / "alpha" and not sub.policies.enabled
    env = envs.make(EnvConfig(id=LBF, num_envs=4), seed=0)
    assert env.spec.num_agents == ENVPOOL_NUM_AGENTS[LBF] and env.spec == LBF_SPEC
    env.close()


# -- split and merge ----------------------------------------------------------------------------------------------
SPEC = EnvSpec(id="grid", obs_shape=(3, 2 + 1 + 2), obs_dtype="float32", action_kind="discrete", num_actions=2,
               action_shape=(3,), num_envs=2, batch_size=2, num_agents=3, agent_obs_size=2, agent_rewards=True,
               action_mask=True)  # rows: view 2 | reward 1 | mask 2; no global state


def test_policy_rows_keep_own_view_and_add_every_agents_view():
    obs = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)  # [B=2, N=3, F=5]
    rows = policy_rows(SPEC, (0, 2), obs)
    assert policy_spec(SPEC, (0, 2)).obs_shape == (2, 2 + 6 + 1 + 2) == rows.shape[1:]
    for b in range(2):
        for j, agent in enumerate((0, 2)):
            np.testing.assert_array_equal(rows[b, j, :2], obs[b, agent, :2])  # own view
            np.testing.assert_array_equal(rows[b, j, 2:8], obs[b, :, :2].reshape(-1))  # all views, agent order
            np.testing.assert_array_equal(rows[b, j, 8:], obs[b, agent, 2:])  # own reward and mask
    np.testing.assert_array_equal(np.asarray(policy_rows(SPEC, (0, 2), jax.numpy.asarray(obs))), rows)


def test_merge_puts_each_policys_actions_in_its_agents_columns():
    merged = merge_actions(SPEC, {"a": (1,), "b": (0, 2)}, {"a": np.array([[7], [8]], np.int32), "b": np.array([[1, 3], [4, 6]], np.int32)})
    np.testing.assert_array_equal(np.asarray(merged), [[1, 7, 3], [4, 8, 6]])


def test_a_composite_segment_splits_into_what_each_policys_trainer_accepts():
    """Act with the composite on LBF rows, build a segment as an actor does, split it as the actor's sender
    does: each part passes the trainer's wire check for its policy, carries its agents' actions and rows and
    its own params version, and the sender delivers every part to its own policy only."""
    cfg = two_policies()
    env = envs.make(cfg.env, seed=0)
    spec = env.spec
    algo = algos.make(cfg, spec)
    params = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
    params = {"alpha": {**params["alpha"], "version": np.int32(3)}, "beta": {**params["beta"], "version": np.int32(5)}}
    builder = SegmentBuilder(spec, cfg.algo.num_steps, algo.extras_spec)
    ts, key = env.reset(), jax.random.PRNGKey(1)
    while not builder.ready(spec.num_envs):
        key, sub = jax.random.split(key)
        action, extras, _ = jax.jit(algo.act)(params, ts.obs, (), None, sub)
        action, extras = np.asarray(action), {k: np.asarray(v) for k, v in extras.items()}
        builder.add(ts, action, extras, 3)
        ts = env.step(action)
    env.close()
    segment = builder.pop(spec.num_envs)
    parts = split_trajectory(cfg, spec, segment)
    for name, agent, version in (("alpha", 0, 3), ("beta", 1, 5)):
        sub_spec = policy_spec(spec, (agent,))
        sub_algo = make_policy_algorithm(policy_experiment(cfg, name), sub_spec)
        part = checked_trajectory(parts[name]._asdict(), sub_spec, cfg.algo.num_steps, sub_algo.extras_spec)
        np.testing.assert_array_equal(part.action[..., 0], segment.action[..., agent])
        np.testing.assert_array_equal(part.obs[..., 0, :12], segment.obs[..., agent, :12])
        np.testing.assert_array_equal(part.extras["logp"][..., 0], segment.extras[f"{name}/logp"][..., 0])
        assert (part.policy_version == version).all()

    class Recorder:
        def __init__(self, full: bool = False):
            self.sent, self.full = [], full

        def send(self, tree, timeout_ms=None, *, version=-1, meta=None):
            if self.full:
                return False
            self.sent.append((tree, version, meta))
            return True

    alpha, beta = Recorder(), Recorder(full=True)
    sender = PolicySender(cfg, spec, {"alpha": alpha, "beta": beta})
    assert not sender.send(segment, 0, meta={"actor": 0})  # beta's trainer is full: the segment waits
    beta.full = False
    assert sender.send(segment, 0, meta={"actor": 0})  # now only beta's part goes
    assert len(alpha.sent) == len(beta.sent) == 1
    assert alpha.sent[0][1:] == (3, {"actor": 0, "policy_name": "alpha"}) and beta.sent[0][1:] == (5, {"actor": 0, "policy_name": "beta"})


# -- checkpoints across layouts -----------------------------------------------------------------------------------
LBF_SPEC = EnvSpec(id=LBF, obs_shape=(2, 18), obs_dtype="float32", action_kind="discrete", num_actions=6,
                   action_shape=(2,), num_envs=4, batch_size=4, max_episode_steps=100, num_agents=2, agent_obs_size=12,
                   action_mask=True)  # envs.make(EnvConfig(id=LBF, num_envs=4)).spec, without building the env


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_a_policy_checkpoint_restores_into_the_single_process_loop_and_back(tmp_path):
    """A distributed trainer's policy checkpoint (``RUN_DIR/policies/<name>/checkpoints``) loads into the
    single-process composite state (``load=``), and a single-process checkpoint loads into one policy."""
    from srljax.learning.learner import Learner

    cfg = dataclasses.replace(two_policies(), log=LogConfig(run_root=str(tmp_path), wandb="disabled"), trial="dist")
    spec = LBF_SPEC
    # a policy trainer's checkpoint, as a policy's TrainerWorker writes it (its own experiment, its own spec)
    beta = dataclasses.replace(policy_experiment(cfg, "beta"), seed=7)
    trained = Learner(beta, policy_spec(spec, (1,)), algo=make_policy_algorithm(beta, policy_spec(spec, (1,))))
    trained.version = 4
    trained.save()
    trained.close(final_checkpoint=False)
    saved = cfg.run_dir / "policies" / "beta" / "checkpoints"
    assert (saved / "4").is_dir()
    single = dataclasses.replace(cfg, trial="single", policies=dataclasses.replace(cfg.policies, named=(
        PolicyConfig("alpha"), PolicyConfig("beta", frozen=True, load=str(saved)))))
    assert problems(single) == []
    learner = Learner(single, spec)
    fresh = _leaves(learner.state["alpha"])
    assert restore_policies(learner, single, spec) == ["beta"]
    for got, want in zip(_leaves(learner.state["beta"]), _leaves(trained.state), strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(_leaves(learner.state["alpha"]), fresh, strict=True):
        np.testing.assert_array_equal(got, want)
    # the other way: the single-process checkpoint holds every policy by name; one of them starts a trainer
    learner.version = 2
    learner.save()
    learner.close(final_checkpoint=False)
    back = dataclasses.replace(cfg, policies=dataclasses.replace(cfg.policies, named=(
        PolicyConfig("alpha"), PolicyConfig("beta", load=str(single.run_dir / "checkpoints")))))
    for got, want in zip(_leaves(load_policy_state(back, "beta", spec)), _leaves(trained.state), strict=True):
        np.testing.assert_array_equal(got, want)


# -- the acceptance run -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_policy_distributed_config_learns_and_its_checkpoints_play_in_one_process(tmp_path):
    """``python -m launch.local configs/lbf_two_policies_distributed.py`` exits 0 with both policies' mean
    return well above random play (~0.055); then both policies' checkpoints, loaded (frozen) into a
    single-process run of the same config, act in one process and beat random play there too."""
    run = subprocess.run([sys.executable, "-m", "launch.local", "configs/lbf_two_policies_distributed.py", "-f", "t",
                          f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines",
                          "total_env_steps=600000"], cwd=ROOT, capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = tmp_path / "lbf_two_policies_distributed" / "t"
    for name in ("alpha", "beta"):
        lines = [json.loads(x) for x in (run_dir / "policies" / name / "metrics.jsonl").read_text().splitlines()]
        assert lines[-1]["update"] == 600000 // (32 * 128) and lines[-1]["episode_return"] >= 0.3, (name, lines[-1])
    cfg = load_file(ROOT / "configs" / "lbf_two_policies_distributed.py")
    cfg = dataclasses.replace(cfg, layout=LayoutConfig(), policies=dataclasses.replace(cfg.policies, named=tuple(
        PolicyConfig(p.name, trainer=p.trainer, load=str(run_dir / "policies" / p.name / "checkpoints"))
        for p in cfg.policies.named)))  # the single-process layout, each policy starting from its checkpoint
    env = envs.make(cfg.env, seed=3)
    algo = algos.make(cfg, env.spec)
    learner_state = {name: load_policy_state(cfg, name, env.spec) for name in cfg.policies.names()}
    params = algo.policy_params(learner_state)
    act = jax.jit(algo.act)
    ts, key, returns = env.reset(), jax.random.PRNGKey(0), []
    while len(returns) < 32:
        key, sub = jax.random.split(key)
        ts = env.step(np.asarray(act(params, ts.obs, (), None, sub)[0]))
        returns += ts.episode_return[~np.isnan(ts.episode_return)].tolist()
    env.close()
    assert np.mean(returns) >= 0.3, returns
