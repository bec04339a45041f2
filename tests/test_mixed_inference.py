"""Inference chosen per policy (issue 41, item 4): one policy served by the policy workers, another acted inline in
the actors, in one distributed experiment (``PolicyConfig.inference``): the plan and ``--show``, the served
composite on its agents' rows, the refusals, and a real run with local processes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

from algos.multi_policy import make_multi_policy, policy_rows, served_agents, served_spec
from launch.show import render
from srljax.config import LayoutConfig, PoliciesConfig, PolicyConfig, load_file
from srljax.layout import ACTOR, INFERENCE, PARAMS, POLICY, TRAINER, Stream, plan_of
from srljax.prepare import problems
from srljax.system.shell.bounds import stream_limits
from srljax.types import EnvSpec

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")
ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "lbf_mixed_inference.py"


def mixed(**layout) -> object:
    cfg = load_file(CONFIG)
    return dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, **layout)) if layout else cfg


def with_inference(cfg, attacker: str, defender: str):
    named = tuple(dataclasses.replace(p, inference=attacker if p.name == "attacker" else defender)
                  for p in cfg.policies.named)
    return dataclasses.replace(cfg, policies=dataclasses.replace(cfg.policies, named=named))


# -- the plan and --show --------------------------------------------------------------------------------------------
def test_the_plan_has_policy_workers_for_the_remote_policy_and_params_to_the_actors_for_the_inline_one():
    cfg = mixed()
    assert problems(cfg) == []
    plan = plan_of(cfg)
    assert plan.remote and plan.inference == {"attacker": "remote", "defender": "inline"}
    assert plan.served("remote") == ("attacker",) and plan.served("inline") == ("defender",)
    assert plan.layout.count(POLICY) == 1 and plan.layout.count(TRAINER) == 2 and plan.layout.count(ACTOR) == 2
    streams = set(plan.layout.streams)
    assert {Stream(INFERENCE, ACTOR, POLICY), Stream(PARAMS, TRAINER, POLICY), Stream(PARAMS, TRAINER, ACTOR)} <= streams
    text = render(cfg)
    assert ("inference per policy: attacker remote (served by the policy workers, agents [0]), defender inline "
            "(acted in the actors, agents [1])") in text
    assert "policy x1" in text and "params trainer -> actor" in text and "params trainer -> policy" in text

    # the same policies, both inline: no policy workers, no inference stream; both remote: no params to the actors
    inline = plan_of(with_inference(cfg, "inline", "inline"))
    assert not inline.remote and inline.layout.count(POLICY) == 0
    assert not any(s.kind == INFERENCE or s.dst == POLICY for s in inline.layout.streams)
    remote = plan_of(with_inference(cfg, "remote", ""))  # "": layout.inference (remote in this config)
    assert remote.inference == {"attacker": "remote", "defender": "remote"}
    assert Stream(PARAMS, TRAINER, ACTOR) not in remote.layout.streams and remote.layout.count(POLICY) == 1
    default = plan_of(with_inference(dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, inference="inline")),
                                     "", "remote"))
    assert default.inference == {"attacker": "inline", "defender": "remote"}


# -- the served composite -------------------------------------------------------------------------------------------
GRID = EnvSpec(id="grid", obs_shape=(3, 2 + 1 + 2), obs_dtype="float32", action_kind="discrete", num_actions=2,
               action_shape=(3,), num_envs=4, batch_size=4, num_agents=3, agent_obs_size=2, agent_rewards=True,
               action_mask=True)  # rows: view 2 | reward 1 | mask 2; no global state: a policy's row has every view


def test_served_rows_act_as_the_whole_composite_does_for_their_agents():
    """The policy worker's composite (remote policies only, on the rows the actor cuts) and the actor's inline
    composite give, merged, what the composite of every policy gives (actions, log-probs, values, versions: a
    policy's act key is its own whichever composite acts it). Agents 0 and 2 remote, agent 1 inline."""
    cfg = grid_policies()
    spec = GRID
    obs = np.random.default_rng(0).normal(size=(4, 3, 5)).astype(np.float32)
    obs[..., 3:] = 1.0  # every action legal
    full = make_multi_policy(cfg, spec)
    params = full.policy_params(full.init(jax.random.PRNGKey(3)))
    params = {"attacker": {**params["attacker"], "version": np.int32(4)},
              "defender": {**params["defender"], "version": np.int32(7)}}
    served = make_multi_policy(cfg, spec, ("attacker",), rows=True)
    inline = make_multi_policy(cfg, spec, ("defender",))
    agents = served_agents(cfg, ("attacker",))
    rows = policy_rows(spec, agents, obs)
    assert agents == (0, 2) and served_spec(cfg, spec, ("attacker",)).obs_shape == rows.shape[1:] == (2, 2 + 6 + 1 + 2)
    key = jax.random.PRNGKey(0)
    want, want_extras, _ = jax.jit(full.act)(params, obs, (), None, key)
    got_r, extras_r, _ = jax.jit(served.act)({"attacker": params["attacker"]}, rows, (), None, key)
    got_i, extras_i, _ = jax.jit(inline.act)({"defender": params["defender"]}, obs, (), None, key)
    assert got_r.shape == (4, 2) and set(extras_r) == {k for k in want_extras if k.startswith("attacker/")}
    assert set(extras_i) == {k for k in want_extras if k.startswith("defender/")}
    merged = np.array(got_i)
    merged[:, list(agents)] = np.asarray(got_r)
    np.testing.assert_array_equal(merged, np.asarray(want))
    for k, v in {**extras_r, **extras_i}.items():
        np.testing.assert_allclose(np.asarray(v), np.asarray(want_extras[k]), rtol=1e-5, atol=1e-6)
    assert (np.asarray(extras_r["attacker/version"]) == 4).all() and (np.asarray(extras_i["defender/version"]) == 7).all()
    # a request of the served rows fits the inference socket's bound (each row carries every agent's view)
    assert stream_limits(cfg, spec, full.extras_spec)["requests"] >= 2 * rows.nbytes


def grid_policies():
    return dataclasses.replace(mixed(), algo=dataclasses.replace(mixed().algo, hidden_sizes=(8,)),
                               policies=PoliciesConfig(named=(PolicyConfig("attacker", inference="remote"),
                                                              PolicyConfig("defender", inference="inline")),
                                                       agents=("attacker", "defender", "attacker")))


def test_a_part_staler_than_its_own_policys_lag_stays_at_the_actor():
    """Staleness is per policy: a segment whose defender part (inline, acted at version 2, defender's newest 8) is
    staler than ``trainer.max_policy_lag=4`` while its attacker part (remote, 10 against 12) is not: only the attacker
    part is sent; the segment is dropped whole only when every part is stale."""
    from types import SimpleNamespace

    from srljax.system.acting.actor import ActorWorker
    from srljax.system.acting.policy_streams import PolicySender
    from srljax.types import Trajectory

    cfg = grid_policies()
    assert cfg.trainer.max_policy_lag == 4
    full = make_multi_policy(cfg, GRID)
    t, b = 3, 4
    extras = {k: np.zeros((t, b, *shape), dtype) for k, (shape, dtype) in full.extras_spec.items()}
    extras["attacker/version"][:], extras["defender/version"][:] = 10, 2
    segment = Trajectory(obs=np.zeros((t, b, 3, 5), np.float32), action=np.zeros((t, b, 3), np.int32),
                         reward=np.zeros((t, b), np.float32), terminated=np.zeros((t, b), bool),
                         truncated=np.zeros((t, b), bool), extras=extras, policy_version=np.full(b, 2, np.int32))
    actor = object.__new__(ActorWorker)  # only what the check reads: its plan, params follower and inference client
    actor.cfg, actor.plan = cfg, plan_of(cfg)
    actor.follower = SimpleNamespace(versions=lambda: {"defender": 8})
    actor.inference = SimpleNamespace(newest_version=12)
    assert actor.policy_versions() == {"attacker": 12, "defender": 8}
    assert actor._stale_parts(segment) == {"defender"}
    actor.inference.newest_version = 15
    assert actor._stale_parts(segment) == {"attacker", "defender"}

    class Recorder:
        def __init__(self):
            self.sent = []

        def send(self, tree, timeout_ms=None, *, version=-1, meta=None):
            self.sent.append((tree, version, meta))
            return True

    attacker, defender = Recorder(), Recorder()
    sender = PolicySender(cfg, GRID, {"attacker": attacker, "defender": defender})
    assert sender.send(segment, 0, meta={"actor": 0}, skip=frozenset({"defender"}))
    assert [x[1:] for x in attacker.sent] == [(10, {"actor": 0, "policy_name": "attacker"})] and defender.sent == []
    assert attacker.sent[0][0].obs.shape == (t, b, 2, 2 + 6 + 1 + 2)  # attacker's two agents' rows


# -- refusals -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, expect", [
    (lambda c: dataclasses.replace(c, layout=LayoutConfig()),
     "policies ['attacker']: inference=remote needs policy workers, which layout.mode=single does not have"),
    (lambda c: with_inference(c, "gpu", "inline"), "policy 'attacker': inference='gpu' must be 'inline', 'remote'"),
    (lambda c: dataclasses.replace(c, layout=dataclasses.replace(c.layout, num_policy_workers=0)),
     "the inference stream actor -> policy has no server: there are 0 policy workers; set "
     "layout.num_policy_workers>=1 or layout.inference=inline (and no policy's inference=remote)"),
    (lambda c: dataclasses.replace(c, layout=dataclasses.replace(c.layout, deterministic=True)),
     "layout.deterministic=true needs one policy, no PBT, no league"),
    (lambda c: dataclasses.replace(c, policies=dataclasses.replace(c.policies, named=(
        dataclasses.replace(c.policies.named[0], algo=dataclasses.replace(c.algo, lstm_size=8)), c.policies.named[1]))),
     "policies ['attacker']: recurrent policies with several policies are not built; set lstm_size=0"),
])
def test_what_does_not_fit_is_refused_with_one_clear_message(change, expect):
    found = [p for p in problems(change(mixed())) if expect in p]
    assert len(found) == 1, problems(change(mixed()))


# -- a real run -----------------------------------------------------------------------------------------------------
SMALL_CONFIG = """
import dataclasses

from configs.lbf_mixed_inference import experiment as mixed


def experiment():
    cfg = mixed()
    named = tuple(dataclasses.replace(p, trainer=dataclasses.replace(p.trainer or cfg.trainer, batch_envs=8,
                                                                     num_minibatches=2, update_epochs=2))
                  for p in cfg.policies.named)
    return dataclasses.replace(
        cfg, total_env_steps=8 * 16 * UPDATES, env=dataclasses.replace(cfg.env, num_envs=4),
        algo=dataclasses.replace(cfg.algo, num_steps=16, hidden_sizes=(16,)),
        trainer=dataclasses.replace(cfg.trainer, batch_envs=8, num_minibatches=2, update_epochs=2),
        policies=dataclasses.replace(cfg.policies, named=named))
"""


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def small_config(tmp_path: Path, updates: int) -> Path:
    config = tmp_path / "small_mixed.py"
    config.write_text(textwrap.dedent(SMALL_CONFIG).replace("UPDATES", str(updates)))
    return config


def check_mixed_run(run_dir: Path, updates: int, policy: dict, actors: list[dict]) -> None:
    """Both policies trained every update; the policy worker served only attacker's agent (envs x 1 agent rows), the
    actors acted defender's agent themselves on every row they recorded."""
    for name in ("attacker", "defender"):
        lines = read_jsonl(run_dir / "policies" / name / "metrics.jsonl")
        assert [x["update"] for x in lines] == list(range(1, updates + 1)), name
        assert all(np.isfinite(x["loss"]) and x["approx_kl"] > 0 for x in lines), (name, lines[-1])
        assert (run_dir / "policies" / name / "checkpoints").is_dir()
    assert read_jsonl(run_dir / "policies" / "defender" / "metrics.jsonl")[-1]["lr"] == pytest.approx(3e-4)
    stepped = sum(a["env_steps"] for a in actors)
    assert stepped >= 8 * 16 * updates
    assert policy["agent_rows"] == policy["rows"] >= stepped  # one agent per env row, every recorded row served
    assert all(a["inline_agent_rows"] == a["env_steps"] > 0 and a["requests"] > 0 for a in actors)
    assert policy["params/received"] > 0 and actors[0]["params/received"] > 0


def test_the_threads_backend_serves_one_policy_remotely_and_acts_the_other_inline(tmp_path):
    from launch.threads import run_threads
    from srljax.config import apply_overrides

    updates = 3
    cfg = apply_overrides(load_file(small_config(tmp_path, updates)),
                          ["trial=th", f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines"])
    result = run_threads(cfg)
    assert (result.exit_code, result.reason) == (0, "done"), result.message
    check_mixed_run(Path(cfg.run_dir), updates, result.worker_metrics("policy", 0)[-1],
                    [result.worker_metrics("actor", i)[-1] for i in range(2)])


def test_both_policies_remote_take_the_same_rows_path_in_threads(tmp_path):
    """Both remote (the layout's default here): the policy worker serves both agents of each row (32 s at load 30)."""
    from launch.threads import run_threads
    from srljax.config import apply_overrides

    updates = 3
    cfg = apply_overrides(load_file(small_config(tmp_path, updates)),
                          ["trial=both", f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines"])
    both = with_inference(cfg, "", "")
    result = run_threads(both)
    assert (result.exit_code, result.reason) == (0, "done"), result.message
    policy = result.worker_metrics("policy", 0)[-1]
    actors = [result.worker_metrics("actor", i)[-1] for i in range(2)]
    assert policy["agent_rows"] == 2 * policy["rows"] >= 2 * sum(a["env_steps"] for a in actors) > 0
    assert not any("inline_agent_rows" in a for a in actors)
    for name in ("attacker", "defender"):
        assert read_jsonl(Path(both.run_dir) / "policies" / name / "metrics.jsonl")[-1]["update"] == updates


@pytest.mark.slow  # 66-138 s on the 2 shared cores at load 25-28 (5 worker processes, each importing jax and compiling)
def test_local_processes_serve_one_policy_remotely_and_act_the_other_inline(tmp_path):
    """``launch.local`` with 2 actors, one policy worker and two trainers (``check_mixed_run``), each worker's log
    naming what it acts."""
    updates = 6
    run = subprocess.run([sys.executable, "-m", "launch.local", str(small_config(tmp_path, updates)), "-f", "t",
                          f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines"], cwd=ROOT,
                         capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = tmp_path / "lbf_mixed_inference" / "t"
    check_mixed_run(run_dir, updates, read_jsonl(run_dir / "workers" / "policy-0.jsonl")[-1],
                    [read_jsonl(run_dir / "workers" / f"actor-{i}.jsonl")[-1] for i in range(2)])
    assert "policies attacker (agents [0])" in (run_dir / "logs" / "policy-0.log").read_text()
    assert "attacker remote, defender inline inference" in (run_dir / "logs" / "actor-0.log").read_text()
    trainers = [read_jsonl(run_dir / "workers" / f"trainer-{i}.jsonl")[-1] for i in range(2)]
    assert all(t["updates"] == updates for t in trainers)
