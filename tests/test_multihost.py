"""Two trainer processes on localhost form one ``jax.distributed`` group and stay in lockstep.

    .venv/bin/pytest tests/test_multihost.py -q

Each process (``python tests/test_multihost.py worker RANK DIR``) is a real ``TrainerWorker`` with
2 fake CPU devices: its ``setup`` joins the group through name resolution (the coordinator bound
to 127.0.0.1), it receives its own 4 of the 8 env columns of each batch over its sample socket,
and both save one orbax checkpoint together. The test checks that both end with identical params,
equal (to float tolerance) to one process with one device on the whole batches, and that the
checkpoint restores to them. The Slurm variant joins through Slurm's environment instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from srljax.config import CheckpointConfig, EnvConfig, Experiment, LayoutConfig, LogConfig, PPOConfig, TrainerConfig
from srljax.types import EnvSpec, Trajectory

T, B, HOSTS, UPDATES = 16, 8, 2, 4
SPEC = EnvSpec(
    id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2,
    num_envs=B, batch_size=B,
)
TIMEOUT_S = 150


def experiment(run_root: str, num_hosts: int, devices: int) -> Experiment:
    return Experiment(
        name="multihost",
        trial="t0",
        total_env_steps=UPDATES * T * B,
        env=EnvConfig(num_envs=B),
        layout=LayoutConfig(mode="distributed" if num_hosts > 1 else "single"),
        algo=PPOConfig(num_steps=T, hidden_sizes=(32, 32)),
        trainer=TrainerConfig(devices=devices, num_hosts=num_hosts, num_minibatches=2, update_epochs=2),
        log=LogConfig(run_root=run_root, wandb="disabled"),
        checkpoint=CheckpointConfig(every_updates=UPDATES, keep=1, final=False),
    )


def batch(seed: int) -> Trajectory:
    """The global batch [T+1, B] of update ``seed``; every process can rebuild it."""
    rng = np.random.default_rng(seed)
    return Trajectory(
        obs=rng.normal(size=(T + 1, B, 4)).astype(np.float32),
        action=rng.integers(0, 2, (T + 1, B)).astype(np.int32),
        reward=rng.normal(size=(T + 1, B)).astype(np.float32),
        terminated=rng.random((T + 1, B)) < 0.05,
        truncated=rng.random((T + 1, B)) < 0.02,
        extras={
            "logp": rng.normal(-0.7, 0.1, (T + 1, B)).astype(np.float32),
            "value": rng.normal(size=(T + 1, B)).astype(np.float32),
        },
        policy_version=np.zeros(B, np.int32),
    )


def columns(traj: Trajectory, start: int, stop: int) -> Trajectory:
    return Trajectory(
        obs=traj.obs[:, start:stop],
        action=traj.action[:, start:stop],
        reward=traj.reward[:, start:stop],
        terminated=traj.terminated[:, start:stop],
        truncated=traj.truncated[:, start:stop],
        extras={k: v[:, start:stop] for k, v in traj.extras.items()},
        policy_version=traj.policy_version[start:stop],
    )


def worker(mode: str, folder: Path) -> None:
    """One trainer process: join, train on its columns, save together, write params and facts."""
    from srljax.comm.names import DirectoryNames
    from srljax.parallel import multihost as distributed

    cfg = experiment(str(folder / "runs"), HOSTS, 2)
    share = B // HOSTS
    if mode == "slurm":  # one task per virtual node of an srun step
        group = distributed.join_via_slurm(timeout_s=60)
        rank = group.process_id
        import jax

        from srljax.learning.learner import Learner

        learner = Learner(cfg, SPEC)
        for update in range(UPDATES):  # the checkpoint at update 4 is written by both, together
            learner.step(columns(batch(update), rank * share, (rank + 1) * share))
        learner.close()
    else:  # the trainer worker's own path: join in setup, columns over the wire, cut, sharded update
        import jax

        from srljax.comm import SampleSender
        from srljax.system.shell.common import trial_name
        from srljax.system.training.trainer import TrainerWorker

        rank = int(mode)
        trainer = TrainerWorker(cfg, rank, DirectoryNames(folder / "names"))
        trainer.spec = SPEC  # what the controller's configure message carries
        trainer.setup()
        group, learner = trainer.group, trainer.learner
        with SampleSender(trainer.receiver.address, trial_name(cfg)) as sender:
            for update in range(UPDATES):  # the checkpoint at update 4 is written by both, together
                assert sender.send(columns(batch(update), rank * share, (rank + 1) * share), timeout_ms=30_000)
            deadline = time.monotonic() + TIMEOUT_S
            while (learner.version < UPDATES or trainer.running is not None) and time.monotonic() < deadline:
                trainer.poll()
        trainer.close()
    params = jax.device_get(learner.policy_params())
    flat = {jax.tree_util.keystr(path): np.asarray(x) for path, x in jax.tree_util.tree_leaves_with_path(params)}
    np.savez(folder / f"params{rank}.npz", **flat)
    facts = {"devices": jax.device_count(), "version": learner.version, "bind": group.bind}
    (folder / f"done{rank}.json").write_text(json.dumps(facts))
    distributed.shutdown()


def run_group(folder: Path) -> list[subprocess.Popen]:
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "PYTHONPATH": str(ROOT),
    }
    procs = []
    for rank in range(HOSTS):
        with open(folder / f"worker{rank}.log", "w") as log:  # the child keeps its own copy of the fd
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "worker", str(rank), str(folder)], env=env, cwd=ROOT,
                    stdout=log, stderr=subprocess.STDOUT,
                )
            )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc in procs:  # after jax.distributed.initialize JAX catches SIGTERM; SIGKILL ends it
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    return procs


def test_two_processes_keep_identical_params(tmp_path: Path):
    procs = run_group(tmp_path)
    logs = "\n".join(f"--- worker{r}:\n" + (tmp_path / f"worker{r}.log").read_text()[-3000:] for r in range(HOSTS))
    assert [p.returncode for p in procs] == [0] * HOSTS, logs
    check_group(tmp_path, logs)


def check_group(tmp_path: Path, logs: str) -> None:
    facts = [json.loads((tmp_path / f"done{rank}.json").read_text()) for rank in range(HOSTS)]
    assert [(f["devices"], f["version"]) for f in facts] == [(4, UPDATES)] * HOSTS, logs
    assert facts[0]["bind"].startswith("127.0.0.1:") and facts[1]["bind"] is None  # never all interfaces
    got = [dict(np.load(tmp_path / f"params{rank}.npz")) for rank in range(HOSTS)]
    assert got[0].keys() == got[1].keys()
    for key in got[0]:
        np.testing.assert_array_equal(got[0][key], got[1][key], err_msg=key)  # bitwise: one replicated state

    # the same batches on one process and one device
    import jax

    from srljax.learning.learner import Learner
    from srljax.storage.checkpoint import Checkpointer

    one = Learner(experiment(str(tmp_path / "single"), 1, 1), SPEC, checkpoints=False)
    for update in range(UPDATES):
        one.step(batch(update))
    ref = jax.device_get(one.policy_params())
    for path, x in jax.tree_util.tree_leaves_with_path(ref):
        np.testing.assert_allclose(got[0][jax.tree_util.keystr(path)], x, atol=1e-5, err_msg=str(path))

    # the group's checkpoint, written by both processes, restores in a single process
    ckpt = Checkpointer(tmp_path / "runs" / "multihost" / "t0" / "checkpoints")
    assert ckpt.all_steps() == [UPDATES]
    restored = ckpt.restore(like=one.state)  # a target with shardings: the saved topology differs
    for a, b in zip(jax.tree.leaves(restored.params), jax.tree.leaves(ref["params"])):
        np.testing.assert_allclose(np.asarray(a), b, atol=1e-5)
    ckpt.close()


CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"


@pytest.mark.slurm
def test_two_slurm_nodes_form_one_group(tmp_path: Path):
    """The same group as one ``srun`` step on the Slurm test cluster: one trainer task per virtual node."""
    up = subprocess.run(["bash", str(CLUSTER), "status"], check=False, capture_output=True, text=True, timeout=60)
    if up.returncode != 0:
        if os.environ.get("SLURM_TEST_REQUIRED") == "1":
            pytest.fail(f"Slurm test cluster is down: {up.stdout}{up.stderr}")
        pytest.skip("Slurm test cluster is not up (bash tests/slurm/cluster.sh up)")
    command = [
        "bash", str(CLUSTER), "exec", "srun", "-N2", "-n2", "--time=5", f"--chdir={ROOT}",
        "--output", str(tmp_path / "worker%t.log"),
        "env", "JAX_PLATFORMS=cpu", "XLA_FLAGS=--xla_force_host_platform_device_count=2", f"PYTHONPATH={ROOT}",
        sys.executable, __file__, "worker", "slurm", str(tmp_path),
    ]
    proc = subprocess.run(command, check=False, capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    logs = proc.stdout + proc.stderr + "".join(
        f"--- worker{r}:\n" + p.read_text()[-3000:] for r, p in enumerate(sorted(tmp_path.glob("worker*.log")))
    )
    assert proc.returncode == 0, logs
    facts = json.loads((tmp_path / "done0.json").read_text())
    # Slurm's coordinator is the first node's name, bound to the address that name resolves to
    assert facts["bind"].startswith("127.0.0.1:"), facts
    check_group(tmp_path, logs)


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    worker(sys.argv[2], Path(sys.argv[3]))
