"""Device placement as the launchers apply it: each worker process's environment (``srljax.parallel.devices``).

    .venv/bin/python -m pytest tests/test_devices.py -q

Nodes are made up (``CUDA_VISIBLE_DEVICES`` lists 8 GPUs, or none), so no GPU is needed. The
local launcher's environments are read off the ``Popen`` calls of ``run_distributed`` itself,
with fake worker processes and a fake controller, so these tests fail if the launcher stops
using the placement rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launch import backend, processes
from launch.threads import run_threads
from srljax.config import ConfigError, Experiment, apply_overrides, load_file
from srljax.parallel import devices
from srljax.parallel.devices import SINGLE_THREAD_XLA
from srljax.system.shell.controller import TrialResult

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo_distributed.py"
EIGHT_GPUS = "0,1,2,3,4,5,6,7"
PLACEMENT_KEYS = ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS", "XLA_FLAGS", *devices.MEMORY_KEYS)
# trainer on GPUs 0-3; two policy workers and five actors on GPU; a buffer
EIGHT_GPU_LAYOUT = ("trainer.devices=4", "trainer.memory_fraction=0.5", "layout.num_policy_workers=2",
                    "layout.policy_device=gpu", "layout.num_actors=5", "layout.actor_device=gpu",
                    "layout.memory_fraction=0.1", "layout.num_buffer_workers=1")


def config(tmp_path: Path, *overrides: str) -> Experiment:
    return apply_overrides(load_file(CONFIG), [f"log.run_root={tmp_path}", "trial=t0", "log.wandb=disabled", *overrides])


def launch_locally(monkeypatch: pytest.MonkeyPatch, cfg: Experiment, environ: dict[str, str]) -> tuple[int, dict]:
    """``run_distributed(cfg)`` under ``environ`` with fake workers; (exit code, {"role/i": child env})."""
    for key in PLACEMENT_KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    started: dict[str, dict[str, str]] = {}

    class FakeWorker:
        pid = -1

        def __init__(self, cmd: list[str], *, env: dict[str, str], **kwargs: object):
            assert cmd[1:3] == ["-m", "srljax.system.shell.run"], cmd
            started[f"{cmd[4]}/{cmd[5]}"] = env

        def poll(self) -> int:
            return 0

    class FakeController:
        def __init__(self, *args: object, **kwargs: object):
            pass

        def run(self) -> TrialResult:
            return TrialResult(0, "done", "fake trial")

        def close(self) -> None:
            pass

    monkeypatch.setattr(processes.subprocess, "Popen", FakeWorker)
    monkeypatch.setattr(backend, "Controller", FakeController)
    monkeypatch.setattr(processes.WorkerProcesses, "_signal_group", staticmethod(lambda proc, sig: None))
    return processes.run_distributed(cfg), started


def test_eight_gpu_node_places_every_role(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    inherited = {"CUDA_VISIBLE_DEVICES": EIGHT_GPUS, "XLA_FLAGS": "--xla_dump_to=/tmp/x",
                 "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9", "SRLJAX_TEST_MARK": "kept"}
    code, env = launch_locally(monkeypatch, config(tmp_path, *EIGHT_GPU_LAYOUT), inherited)
    assert code == 0
    assert sorted(env) == sorted(["trainer/0", "buffer/0", "policy/0", "policy/1", *(f"actor/{i}" for i in range(5))])
    gpus = {name: e["CUDA_VISIBLE_DEVICES"] for name, e in env.items()}
    assert gpus == {"trainer/0": "0,1,2,3", "buffer/0": "", "policy/0": "4", "policy/1": "5",
                    "actor/0": "4", "actor/1": "5", "actor/2": "6", "actor/3": "7", "actor/4": "4"}
    for name, e in env.items():
        assert e["PYTHONUNBUFFERED"] == "1" and e["SRLJAX_TEST_MARK"] == "kept", name
        if name == "buffer/0":
            assert e["JAX_PLATFORMS"] == "cpu", e
            continue
        assert e["JAX_PLATFORMS"] == "cuda,cpu", (name, e["JAX_PLATFORMS"])
        # the fraction under jaxlib's current name; the deprecated one (which it refuses alongside) is gone
        fraction = "0.5" if name == "trainer/0" else "0.1"
        assert (e["XLA_CLIENT_MEM_FRACTION"], e["XLA_PYTHON_CLIENT_PREALLOCATE"]) == (fraction, "true"), name
        assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in e, name
    # light roles: one XLA:CPU thread, after the user's flags; the trainer keeps every core
    assert env["trainer/0"]["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    for name in ("buffer/0", "policy/1", "actor/4"):
        assert env[name]["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {SINGLE_THREAD_XLA}", name


def test_default_fractions_leave_the_trainer_to_jax_and_light_roles_allocate_on_demand(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = config(tmp_path, "trainer.devices=2", "layout.num_policy_workers=3")  # policy_device=auto
    code, env = launch_locally(monkeypatch, cfg, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert code == 0
    assert [env[f"policy/{i}"]["CUDA_VISIBLE_DEVICES"] for i in range(3)] == ["2", "3", "2"]
    assert env["policy/0"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "XLA_CLIENT_MEM_FRACTION" not in env["policy/0"]
    trainer = env["trainer/0"]
    assert trainer["CUDA_VISIBLE_DEVICES"] == "0,1" and "XLA_PYTHON_CLIENT_PREALLOCATE" not in trainer  # JAX's default
    assert env["actor/0"]["JAX_PLATFORMS"] == "cpu" and env["actor/0"]["CUDA_VISIBLE_DEVICES"] == ""  # actor_device=cpu
    assert "XLA_FLAGS" not in trainer and env["actor/0"]["XLA_FLAGS"] == SINGLE_THREAD_XLA


def test_a_node_without_gpus_runs_every_role_on_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, env = launch_locally(monkeypatch, config(tmp_path), {"CUDA_VISIBLE_DEVICES": ""})
    assert code == 0 and sorted(env) == ["actor/0", "actor/1", "policy/0", "trainer/0"]
    for name, e in env.items():
        assert (e["JAX_PLATFORMS"], e["CUDA_VISIBLE_DEVICES"]) == ("cpu", ""), name
        assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in e, name


def test_gpus_the_node_lacks_start_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, env = launch_locally(monkeypatch, config(tmp_path, "layout.actor_device=gpu"), {"CUDA_VISIBLE_DEVICES": ""})
    assert code == 2 and env == {} and list(tmp_path.iterdir()) == []
    assert "layout.actor_device=gpu but this node has no visible GPU" in capsys.readouterr().err
    code, env = launch_locally(monkeypatch, config(tmp_path, "trainer.devices=4"), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert code == 2 and env == {} and list(tmp_path.iterdir()) == []
    assert "trainer 0 on this node needs GPUs 0..3 (trainer.devices=4) but the node has 2: 0, 1" in capsys.readouterr().err


def test_several_trainers_on_one_node_take_consecutive_gpus() -> None:
    cfg = apply_overrides(load_file(CONFIG), ["trainer.devices=2", "trainer.num_hosts=2"])
    environ = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4"}
    assert [processes.worker_env(cfg, "trainer", k, environ)["CUDA_VISIBLE_DEVICES"] for k in (0, 1)] == ["0,1", "2,3"]
    assert processes.worker_env(cfg, "policy", 1, environ)["CUDA_VISIBLE_DEVICES"] == "4"  # the one GPU left
    # trainers hold every GPU: policy workers share theirs rather than finding none
    full = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert [processes.worker_env(cfg, "policy", i, full)["CUDA_VISIBLE_DEVICES"] for i in range(3)] == ["0", "1", "2"]


@pytest.mark.parametrize("exported, trainer, policy", [
    ("cpu", ("cpu", ""), ("cpu", "")),  # rules GPUs out: a CPU run on a GPU box
    ("tpu", ("tpu", ""), ("cpu", "")),  # the trainer keeps the user's accelerator
    ("cuda", ("cuda", "0,1"), ("cuda", "2")),  # kept (no CPU fallback) where the process is on GPU
])
def test_an_exported_jax_platforms_is_kept_where_the_config_leaves_the_choice(exported, trainer, policy) -> None:
    cfg = apply_overrides(load_file(CONFIG), ["trainer.devices=2"])  # policy_device=auto, actor_device=cpu
    environ = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "JAX_PLATFORMS": exported}
    got = {role: processes.worker_env(cfg, role, 0, environ) for role in ("trainer", "policy", "actor")}
    assert (got["trainer"]["JAX_PLATFORMS"], got["trainer"]["CUDA_VISIBLE_DEVICES"]) == trainer
    assert (got["policy"]["JAX_PLATFORMS"], got["policy"]["CUDA_VISIBLE_DEVICES"]) == policy
    assert got["actor"]["JAX_PLATFORMS"] == "cpu"  # actor_device=cpu decides, whatever was exported


def test_an_exported_cpu_platform_contradicting_the_config_is_an_error() -> None:
    cfg = apply_overrides(load_file(CONFIG), ["layout.policy_device=gpu"])
    with pytest.raises(devices.PlacementError, match="layout.policy_device=gpu .* JAX_PLATFORMS=cpu in the environment"):
        processes.worker_env(cfg, "policy", 0, {"CUDA_VISIBLE_DEVICES": "0,1", "JAX_PLATFORMS": "cpu"})


def test_visible_gpus_follows_cuda_visible_devices() -> None:
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ("2", "3")
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert devices.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ()


@pytest.mark.parametrize("override, key", [
    ("layout.memory_fraction=0.1", "layout.memory_fraction=0.1"),
    ("trainer.memory_fraction=0.5", "trainer.memory_fraction=0.5"),
    ("layout.actor_device=gpu", "layout.actor_device=gpu"),
    ("layout.policy_device=gpu", "layout.policy_device=gpu"),
])
def test_threads_backend_refuses_placement_it_cannot_honour(tmp_path: Path, override: str, key: str) -> None:
    cfg = config(tmp_path, override)
    with pytest.raises(ConfigError) as err:
        run_threads(cfg)
    assert key in str(err.value) and "python -m launch.local" in str(err.value), str(err.value)
    assert list(tmp_path.iterdir()) == []  # refused before the run folder exists
    assert devices.threads_problems(config(tmp_path)) == []  # the shipped config runs in threads
