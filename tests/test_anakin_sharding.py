"""The Anakin loop over 4 fake CPU devices (envs and batch split, state replicated) learns as on one device.

The device count is fixed when JAX starts, so the runs happen in a child process (``python
tests/test_anakin_sharding.py child``) with ``--xla_force_host_platform_device_count=4``, which prints JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"ppo": ("episode_return", "policy_loss", "value_loss", "entropy"), "dqn": ("loss", "q_mean")}


def child(algos: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    import jax

    from srljax.config import DQNConfig, EnvConfig, Experiment, LogConfig, PPOConfig, ReplayConfig, TrainerConfig
    from srljax.loops.train import train

    tmp = tempfile.mkdtemp()
    out: dict[str, dict[int, list]] = {"ppo": {}, "dqn": {}, "devices": len(jax.devices())}
    for d in (1, 4):
        if "ppo" not in algos:
            break
        log = LogConfig(run_root=tmp, wandb="disabled", progress="lines")
        ppo = Experiment(name="ppo", trial=f"d{d}", total_env_steps=8 * 64 * 6,
                         env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8), algo=PPOConfig(num_steps=64),
                         trainer=TrainerConfig(num_minibatches=4, update_epochs=2, devices=d), log=log)
        out["ppo"][d] = [{k: m[k] for k in KEYS["ppo"]} for m in train(ppo).metrics]
    for d in (1, 4):
        if "dqn" not in algos:
            break
        log = LogConfig(run_root=tmp, wandb="disabled", progress="lines")
        dqn = Experiment(name="dqn", trial=f"d{d}", total_env_steps=8 * 40 * 8, env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8),
                         algo=DQNConfig(batch_size=32, replay_ratio=4.0, learning_starts=320, updates_per_call=4,
                                        replay=ReplayConfig(capacity=2000)),
                         trainer=TrainerConfig(devices=d, num_minibatches=1, update_epochs=1),
                         log=dataclasses_replace(log, log_every=1))
        out["dqn"][d] = [{k: m[k] for k in KEYS["dqn"]} for m in train(dqn).metrics]
    print(json.dumps(out))


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


def report_of(algo: str) -> dict:
    pytest.importorskip("gymnax")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, __file__, "child", algo], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# PPO in the default run; DQN (its replay split over the devices too) with -m slow: each pair compiles for 4 devices
@pytest.mark.parametrize("algo", ["ppo", pytest.param("dqn", marks=pytest.mark.slow)])
def test_four_devices_learn_as_one(algo: str) -> None:
    report = report_of(algo)
    assert report["devices"] == 4
    one, four = report[algo]["1"], report[algo]["4"]
    assert len(one) == len(four) > 0
    for a, b in zip(one, four):
        for key in KEYS[algo]:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-3, atol=1e-4, err_msg=f"{algo} {key}")


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(sys.argv[2:])
