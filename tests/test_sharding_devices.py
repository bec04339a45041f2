"""Per-process device placement (``srljax.parallel.devices``) and group discovery (``srljax.parallel.multihost``).

    .venv/bin/pytest tests/test_sharding_devices.py -q

Pure rules on made-up nodes (no GPU needed), plus one child process started with the local
launcher's environment for a CPU actor. The launchers' use of the rule: ``tests/test_devices.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from launch.processes import worker_env
from srljax.comm.names import MemoryNames
from srljax.config import ConfigError, Experiment, LayoutConfig, TrainerConfig, validate
from srljax.parallel import devices
from srljax.parallel import multihost as distributed

NODE = ("0", "1", "2", "3")


def cfg(**layout) -> Experiment:
    return Experiment(trainer=TrainerConfig(devices=2), layout=LayoutConfig(**layout))


def test_trainers_take_consecutive_gpus_and_fail_with_the_gpus_found():
    assert devices.place(cfg(), "trainer", 0, gpus=NODE).gpu_ids == ("0", "1")
    assert devices.place(cfg(), "trainer", 1, gpus=NODE).gpu_ids == ("2", "3")
    with pytest.raises(devices.PlacementError, match="needs GPUs 4..5 .* the node has 4: 0, 1, 2, 3"):
        devices.place(cfg(), "trainer", 2, gpus=NODE)
    assert devices.place(cfg(), "trainer", 0, gpus=()).platform == "cpu"
    env = devices.place(cfg(), "trainer", 0, gpus=NODE).env()
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and "XLA_PYTHON_CLIENT_PREALLOCATE" not in env  # JAX default


def test_policy_workers_share_the_gpus_trainers_leave_and_never_preallocate_by_default():
    placed = [devices.place(cfg(), "policy", i, gpus=NODE, trainer_gpus=2) for i in range(4)]
    assert [p.gpu_ids for p in placed] == [("2",), ("3",), ("2",), ("3",)]
    env = placed[0].env()
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and env["XLA_CLIENT_MEM_FRACTION"] is None
    assert env["JAX_PLATFORMS"] == "cuda,cpu"
    # one GPU held by the trainer: policy workers share it rather than finding none
    assert devices.place(cfg(), "policy", 3, gpus=("0",), trainer_gpus=1).gpu_ids == ("0",)


def test_memory_fraction_preallocates_that_share_under_jaxlibs_current_name():
    p = devices.place(cfg(policy_device="gpu", memory_fraction=0.2), "policy", 0, gpus=NODE)
    environ = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"}  # the deprecated name: jaxlib refuses both
    devices.apply_env(p.env(), environ)
    assert environ["XLA_CLIENT_MEM_FRACTION"] == "0.2" and environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in environ


def test_cpu_roles_and_missing_gpus():
    for role in ("actor", "buffer"):  # actors default to CPU; buffers always
        env = devices.place(cfg(), role, 0, gpus=NODE).env()
        assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert devices.place(cfg(), "policy", 0, gpus=()).platform == "cpu"  # auto without GPUs
    with pytest.raises(devices.PlacementError, match="layout.actor_device=gpu but this node has no visible GPU"):
        devices.place(cfg(actor_device="gpu"), "actor", 0, gpus=())


def test_memory_fraction_is_validated():
    bad = dataclasses.replace(cfg(memory_fraction=1.5), trainer=TrainerConfig(memory_fraction=-0.1))
    with pytest.raises(ConfigError) as err:
        validate(bad)
    assert "layout.memory_fraction=1.5 must be in [0, 1)" in str(err.value)
    assert "trainer.memory_fraction=-0.1 must be in [0, 1)" in str(err.value)


CHILD = """
import json, os
import jax
print(json.dumps({"platform": jax.devices()[0].platform, "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
                  "xla_flags": os.environ["XLA_FLAGS"]}))
"""


def test_a_worker_started_with_the_launchers_environment_runs_where_it_was_placed():
    """The local launcher's environment for a CPU actor reaches JAX in the child (on any machine)."""
    env = worker_env(Experiment(), "actor", 0, {**os.environ, "PYTHONPATH": str(ROOT)})
    proc = subprocess.run([sys.executable, "-c", CHILD], check=False, capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"platform": "cpu", "cuda": "", "xla_flags": env["XLA_FLAGS"]}
    assert env["XLA_FLAGS"].endswith(devices.SINGLE_THREAD_XLA)


def test_coordinator_through_names():
    names = MemoryNames()
    zero = distributed.from_names(names, "exp", "t0", process_id=0, num_processes=2)
    assert zero.bind == zero.coordinator and zero.coordinator.startswith("127.0.0.1:")
    one = distributed.from_names(names, "exp", "t0", process_id=1, num_processes=2, timeout_s=1)
    assert one.coordinator == zero.coordinator and one.bind is None
    assert names.get("exp/t0/coordinator/trainer") == zero.coordinator


def test_coordinator_from_slurm_environment():
    env = {
        "SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "2", "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NODELIST": "localhost,n2",
    }
    zero = distributed.from_slurm(env)
    port = distributed.SLURM_PORT_BASE + (1234 * 16 + 2) % 4096
    assert zero == distributed.Group(f"localhost:{port}", 0, 2, bind=f"127.0.0.1:{port}")
    assert distributed.from_slurm({**env, "SLURM_PROCID": "1"}).bind is None
    assert distributed.slurm_first_host("node[007-010,012],gpu1") == "node007"
    with pytest.raises(RuntimeError, match="SLURM_PROCID is unset"):
        distributed.from_slurm({"SLURM_JOB_ID": "1"})
