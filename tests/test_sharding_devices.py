"""Per-process device placement (``srljax.devices``) and group discovery (``srljax.distributed``).

    .venv/bin/pytest tests/test_sharding_devices.py -q

Pure rules on made-up nodes (no GPU needed), plus one child process that configures itself as
a CPU actor before JAX starts.
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

from srljax import devices, distributed
from srljax.comm.names import MemoryNames
from srljax.config import ConfigError, Experiment, LayoutConfig, TrainerConfig, validate

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
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] is None  # JAX default


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
    p.apply(environ)
    assert environ["XLA_CLIENT_MEM_FRACTION"] == "0.2" and environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in environ


def test_cpu_roles_and_missing_gpus():
    for role in ("actor", "other"):  # actors default to CPU; controller, buffers always
        env = devices.place(cfg(), role, 0, gpus=NODE).env()
        assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert devices.place(cfg(), "policy", 0, gpus=()).platform == "cpu"  # auto without GPUs
    with pytest.raises(devices.PlacementError, match="layout.actor_device=gpu but this node has no visible GPU"):
        devices.place(cfg(actor_device="gpu"), "actor", 0, gpus=())


def test_visible_gpus_follows_cuda_visible_devices():
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ("2", "3")
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ()


def test_memory_fraction_is_validated():
    bad = dataclasses.replace(cfg(memory_fraction=1.5), trainer=TrainerConfig(memory_fraction=-0.1))
    with pytest.raises(ConfigError) as err:
        validate(bad)
    assert "layout.memory_fraction=1.5 must be in [0, 1)" in str(err.value)
    assert "trainer.memory_fraction=-0.1 must be in [0, 1)" in str(err.value)


CHILD = """
import json, os, sys
from srljax import devices
from srljax.config import Experiment
devices.configure_process(Experiment(), "actor", 0)
import jax
print(json.dumps({"platform": jax.devices()[0].platform, "cuda": os.environ["CUDA_VISIBLE_DEVICES"]}))
try:
    devices.configure_process(Experiment(), "actor", 0)
except devices.PlacementError as err:
    print("late:", err)
"""


def test_configure_before_jax_starts_and_refuse_after():
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    first, late = proc.stdout.strip().splitlines()
    assert json.loads(first) == {"platform": "cpu", "cuda": ""}
    assert late.startswith("late: devices.configure must run before the first JAX computation"), late


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
