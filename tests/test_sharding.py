"""Data-parallel trainer on fake CPU devices: 4 devices give the 1-device update, in parallel.

    .venv/bin/pytest tests/test_sharding.py -q

The device count is fixed when JAX starts, so the checks run in a child process
(``python tests/test_sharding.py child``) with ``--xla_force_host_platform_device_count=4``
and report JSON; the tests below read that report.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srljax.config import ConfigError, EnvConfig, Experiment, PPOConfig, TrainerConfig, validate
from srljax.types import EnvSpec, Trajectory

T, B = 32, 8
CASES = {
    # discrete MLP, PPO's defaults (advantage normalisation per minibatch, masks from dones)
    "discrete": (
        EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2),
        PPOConfig(num_steps=T, hidden_sizes=(32, 32)),
    ),
    # continuous with both running normalisers: reductions over the sharded env axis
    "continuous": (
        EnvSpec(id="Hopper-v4", obs_shape=(11,), obs_dtype="float32", action_kind="continuous", action_shape=(3,)),
        PPOConfig(num_steps=T, hidden_sizes=(32, 32), normalize_obs=True, normalize_reward=True),
    ),
}


def experiment(algo: PPOConfig, devices: int, tmp: str) -> Experiment:
    return Experiment(
        total_env_steps=10 * T * B,
        env=EnvConfig(num_envs=B),
        algo=algo,
        trainer=TrainerConfig(devices=devices, num_minibatches=4, update_epochs=2),
    )


def random_batch(spec: EnvSpec, seed: int) -> Trajectory:
    rng = np.random.default_rng(seed)
    if spec.action_kind == "discrete":
        action = rng.integers(0, spec.num_actions, (T + 1, B)).astype(np.int32)
    else:
        action = rng.normal(size=(T + 1, B, *spec.action_shape)).astype(np.float32)
    return Trajectory(
        obs=rng.normal(size=(T + 1, B, *spec.obs_shape)).astype(np.float32),
        action=action,
        reward=rng.normal(size=(T + 1, B)).astype(np.float32),
        terminated=rng.random((T + 1, B)) < 0.05,
        truncated=rng.random((T + 1, B)) < 0.02,
        extras={
            "logp": rng.normal(-1.0, 0.3, (T + 1, B)).astype(np.float32),
            "value": rng.normal(size=(T + 1, B)).astype(np.float32),
            "ret_acc": rng.normal(size=(T + 1, B)).astype(np.float32),  # reward normalisation's running return
        },
        policy_version=np.zeros(B, np.int32),
    )


def gathers_by_computation(hlo: str) -> dict[str, int]:
    """{computation name: all-gathers in it}; ENTRY is the top level, loop bodies are their own."""
    found: dict[str, int] = {}
    name = ""
    for line in hlo.splitlines():
        header = re.match(r"(ENTRY )?%?([\w.\-]+) .*\{$", line)
        if header and not line.startswith(" "):
            name = "ENTRY" if header.group(1) else header.group(2)
        elif re.search(r" all-gather(?:-start)?\(", line):
            found[name] = found.get(name, 0) + 1
    return found


def child() -> None:
    """Runs under 4 fake CPU devices; prints one JSON report."""
    import jax

    from srljax.learning.learner import Learner
    from srljax.parallel import sharding

    report: dict = {"devices": len(jax.devices())}
    for name, (spec, algo) in CASES.items():
        spec = dataclasses.replace(spec, num_envs=B, batch_size=B)
        one = Learner(experiment(algo, 1, ""), spec, checkpoints=False)
        four = Learner(experiment(algo, 4, ""), spec, checkpoints=False)
        diffs, metric_diffs = [], []
        for seed in range(3):
            batch = random_batch(spec, seed)
            m1 = jax.device_get(one.step(batch))
            m4 = jax.device_get(four.step(four.put(batch)))  # put first: the overlapped path
            metric_diffs.append(max(abs(float(m1[k]) - float(m4[k])) for k in m1 if np.isfinite(m1[k])))
            p1, p4 = jax.device_get(one.policy_params()), jax.device_get(four.policy_params())
            diffs.append(max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p4))))
        hlo = four._update.as_text()
        report[name] = {
            "param_diff": diffs,
            "metric_diff": metric_diffs,
            "state_sharding": str(jax.tree.leaves(four.state)[0].sharding.spec),
            "state_devices": len(jax.tree.leaves(four.state)[0].sharding.device_set),
            "policy_params_devices": len(jax.tree.leaves(four.policy_params())[0].devices()),
            "placed_spec": str(four.put(batch).obs.sharding.spec),
            # leading dims of every matmul: per-device minibatch rows show the compute is split
            "dot_rows": sorted({int(m) for m in re.findall(r"= f32\[(\d+),\d+\]\{1,0\} dot\(", hlo)}),
            "all_gathers_in": gathers_by_computation(hlo),
            "version": four.version,
        }
    try:
        sharding.make_mesh(devices_per_host=8)
        report["too_many"] = "no error"
    except sharding.DeviceError as err:
        report["too_many"] = str(err)
    print("REPORT " + json.dumps(report), flush=True)


@pytest.fixture(scope="module")
def report() -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    proc = subprocess.run(
        [sys.executable, __file__, "child"], check=False, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("REPORT ") :])


@pytest.mark.parametrize("case", list(CASES))
def test_four_devices_match_one_device(report: dict, case: str):
    r = report[case]
    assert report["devices"] == 4 and r["version"] == 3
    assert max(r["param_diff"]) < 1e-5, r
    assert max(r["metric_diff"]) < 1e-4, r


@pytest.mark.parametrize("case", list(CASES))
def test_layout_is_data_parallel(report: dict, case: str):
    r = report[case]
    assert r["state_sharding"] == "P()" and r["state_devices"] == 4  # replicated
    assert r["placed_spec"] == "P(None, 'batch')"  # batch split on its env axis
    assert r["policy_params_devices"] == 1  # actors get one device's replica, not a 4-way program
    minibatch = T * B // 4
    # every device multiplies only its quarter of each minibatch; a full-minibatch matmul would
    # mean XLA gathered the minibatch and repeated the whole gradient on every device
    assert minibatch // 4 in r["dot_rows"] and minibatch not in r["dot_rows"], r["dot_rows"]
    # shuffling across env columns gathers the batch once per update, outside the epoch and
    # minibatch loops: no data moves per gradient step except the gradient all-reduce
    assert set(r["all_gathers_in"]) == {"ENTRY"}, r["all_gathers_in"]


def test_more_devices_than_exist_fails_with_the_devices_found(report: dict):
    msg = report["too_many"]
    assert "trainer.devices=8" in msg and "sees 4 cpu device(s)" in msg and "cpu:3" in msg, msg


def test_validation_gives_the_arithmetic():
    cfg = Experiment(
        env=EnvConfig(num_envs=8), algo=PPOConfig(num_steps=128), trainer=TrainerConfig(devices=3, num_minibatches=4)
    )
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    text = str(err.value)
    assert "minibatch 256 (batch 1024 / 4 minibatches) is not divisible by 3 trainer devices" in text, text
    assert "8 % 3 = 2" in text, text
    validate(dataclasses.replace(cfg, trainer=TrainerConfig(devices=4)))  # 8 columns, minibatch 256: fine


def test_launcher_rejects_three_devices_before_starting():
    proc = subprocess.run(
        [sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "trainer.devices=3", "log.wandb=disabled"],
        check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "batch 1024" in proc.stderr and "3 trainer devices" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_atari_cnn_update_matches_on_two_and_four_devices():
    """The unrolled CNN path, through the benchmark's CPU correctness mode (minutes on 2 cores)."""
    proc = subprocess.run(
        [sys.executable, "bench/sharding.py"], check=False, capture_output=True, text=True, timeout=1800, cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert proc.returncode == 0 and "4 devices vs 1" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_split_samples_is_a_no_op_without_a_mesh():
    import jax.numpy as jnp

    from algos.parallel import split_samples

    x = {"a": jnp.ones((4, 6))}
    assert split_samples(x, axis=1) is x


if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    child()
