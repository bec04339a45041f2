"""Worker restart: a lost actor, policy or buffer worker comes back and the trial goes on.

The controller restarts a lost non-trainer worker through the backend that started it, up to
``layout.max_restarts`` times per worker (``srljax/system/shell/controller.py``). Here, on the small
CartPole graph:

* threads: actor/1, policy/0 and buffer/0 each raise once mid-run; each is restarted (the policy
  worker and the buffer at new addresses, which their clients follow) and the trial ends ``done``
  with the three restarts in ``status.json`` and in the trainer's ``worker_restarts`` metric;
* processes: actor/1 is SIGKILLed mid-run; it is restarted as a new process and the trial ends
  with exit 0 (one actor alone cannot fill the batches under the lag throttle, so the trial
  finishes only because the restart works);
* a worker that crashes every time spends its budget and ends the trial, naming it, the count,
  the last reason and its traceback; ``layout.max_restarts=0`` ends it at the first loss, as before;
* processes: trainer/0 is SIGKILLed after a checkpoint (inline inference), or with no checkpoint
  (remote inference); it comes back from the checkpoint or from update 0, and the trial ends with
  exit 0 and one metrics line per update;
* slow, the chaos test: 4 actors, a policy worker and a buffer, a random non-trainer worker
  SIGKILLed every 15 s for the whole run and the trainer once; CartPole still reaches a mean
  return of 475.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from launch.threads import read_jsonl, run_threads
from srljax.system.acting.actor import ActorWorker
from srljax.system.acting.policy import PolicyWorker
from srljax.system.staging.buffer import BufferWorker
from tests.test_system_processes import ROOT, Launch, gone
from tests.test_system_threads import small_config


def crash_once(monkeypatch, cls: type, index: int, when, crashed: list[str]) -> None:
    """Make ``cls`` worker ``index`` raise once, in ``poll``, when ``when(worker)`` is first true."""
    original = cls.poll

    def poll(self) -> None:
        if self.index == index and self.name not in crashed and when(self):
            crashed.append(self.name)
            raise RuntimeError(f"chaos: {self.name} crashes once")
        original(self)

    monkeypatch.setattr(cls, "poll", poll)


def test_threads_restart_an_actor_a_policy_worker_and_a_buffer(tmp_path, monkeypatch):
    crashed: list[str] = []
    crash_once(monkeypatch, ActorWorker, 1, lambda w: w.stats.counters["segments"] >= 2, crashed)
    crash_once(monkeypatch, PolicyWorker, 0, lambda w: w.stats.counters["rows"] >= 4 * 32 * 4, crashed)
    crash_once(monkeypatch, BufferWorker, 0, lambda w: w.stats.counters["segments"] >= 6, crashed)
    cfg = small_config(tmp_path, "layout.num_buffer_workers=1", f"total_env_steps={2 * 4 * 32 * 16}",
                       "layout.restart_backoff_seconds=0.2")
    result = run_threads(cfg)
    assert result.exit_code == 0 and result.reason == "done", result.message
    assert sorted(crashed) == ["actor/1", "buffer/0", "policy/0"], crashed
    assert result.restarts["by_worker"] == {"actor/1": 1, "buffer/0": 1, "policy/0": 1}, result.restarts
    assert all("failed: RuntimeError: chaos:" in e["reason"] for e in result.restarts["events"]), result.restarts
    status = json.loads((Path(cfg.run_dir) / "status.json").read_text())
    assert status["restarts"]["total"] == 3 and status["restarts"]["by_worker"] == result.restarts["by_worker"]
    assert "3 worker restarts (actor/1 x1, buffer/0 x1, policy/0 x1)" in status["message"]
    assert result.metrics[-1]["update"] == cfg.num_updates
    assert result.metrics[-1]["worker_restarts"] == 3  # the trainer's metric (metrics.jsonl, wandb, Prometheus)
    # the newcomers ran: the last record of each is its clean stop, after work done
    assert result.worker_metrics("actor", 1)[-1]["state"] == "stopped"
    assert result.worker_metrics("policy", 0)[-1]["rows"] > 0
    assert result.worker_metrics("buffer", 0)[-1]["segments"] > 0


def test_a_worker_that_keeps_crashing_spends_its_budget_and_ends_the_trial(tmp_path):
    cfg = small_config(tmp_path, "layout.inference=inline", "total_env_steps=50000000",
                       "layout.custom_roles=tests.liveness_roles:CrashingWorker", "layout.max_restarts=2",
                       "layout.restart_backoff_seconds=0.1")
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "error", result.message
    head = result.message.splitlines()[0]
    assert head.startswith("worker crashing/0 (pid "), result.message
    assert ("failed (restarted 2 of layout.max_restarts=2 times, the last after: failed: RuntimeError: "
            "CrashingWorker crashes again):") in head, result.message
    assert "Traceback" in result.message and "CrashingWorker crashes again" in result.message
    assert result.restarts["by_worker"] == {"crashing/0": 2}, result.restarts
    status = json.loads((Path(cfg.run_dir) / "status.json").read_text())
    assert (status["exit_code"], status["reason"], status["restarts"]["total"]) == (1, "error", 2)


def test_max_restarts_0_ends_the_trial_at_the_first_loss(tmp_path):
    cfg = small_config(tmp_path, "layout.inference=inline", "total_env_steps=50000000",
                       "layout.custom_roles=tests.liveness_roles:CrashingWorker", "layout.max_restarts=0")
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "error", result.message
    assert result.message.startswith("worker crashing/0 (pid "), result.message
    assert "failed:\n" in result.message and "restart" not in result.message, result.message
    assert result.restarts["total"] == 0


def wait_for_updates(run: Launch, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(read_jsonl(run.run_dir / "metrics.jsonl")) < count:
        assert time.monotonic() < deadline and run.proc.poll() is None, run.output
        time.sleep(0.2)


@pytest.mark.slow  # ~60 s; the default run keeps the trainer's process restart and the threads restarts
def test_processes_restart_a_sigkilled_and_a_sigstopped_actor(tmp_path):
    """actor/1 SIGKILLed (its process exits), then actor/0 SIGSTOPped (silent: the controller must kill
    it before its successor starts); both come back as new processes and the trial finishes."""
    run = Launch(tmp_path, "restart", f"total_env_steps={2 * 4 * 32 * 30}", "layout.inference=inline",
                 "layout.restart_backoff_seconds=0.2", "layout.heartbeat_timeout_seconds=3")
    stopped = 0
    try:
        run.wait_for(r"all workers started", timeout=240)
        wait_for_updates(run, 1, timeout=120)
        pids = run.worker_pids()
        os.kill(pids["actor/1"], signal.SIGKILL)
        killed_at = time.monotonic()
        run.wait_for(rf"restarting worker actor/1 \(pid {pids['actor/1']}\) in 0.2 s \(restart 1 of "
                     r"layout.max_restarts=3\): its process exited with code -9", timeout=30)
        back = run.wait_for(r"worker actor/1 \(pid (\d+)\) is back after", timeout=120)
        print(f"actor/1 back {time.monotonic() - killed_at:.1f} s after SIGKILL")
        assert int(back.group(1)) != pids["actor/1"]

        stopped = pids["actor/0"]
        os.kill(stopped, signal.SIGSTOP)
        stopped_at = time.monotonic()
        run.wait_for(rf"restarting worker actor/0 \(pid {stopped}\) in 0.2 s \(restart 1 of "
                     r"layout.max_restarts=3\): no heartbeat for", timeout=60)
        back0 = run.wait_for(r"worker actor/0 \(pid (\d+)\) is back after", timeout=120)
        assert gone([stopped])  # killed (before the successor started: the controller kills, then starts)
        print(f"actor/0 back {time.monotonic() - stopped_at:.1f} s after SIGSTOP")

        assert run.wait(timeout=240) == 0, run.output
        status = run.status()
        assert (status["exit_code"], status["reason"]) == (0, "done"), status
        assert status["restarts"]["by_worker"] == {"actor/0": 1, "actor/1": 1}
        assert status["restarts"]["events"][0]["reason"] == "its process exited with code -9"
        assert status["restarts"]["events"][1]["reason"].startswith("no heartbeat for")
        assert "finished: done" in run.output and "2 worker restarts (actor/0 x1, actor/1 x1)" in run.output
        log = (run.run_dir / "logs" / "actor-1.log").read_text()
        assert "actor/1 restarted by the controller" in log
        assert read_jsonl(run.run_dir / "metrics.jsonl")[-1]["worker_restarts"] == 2
        assert gone([*pids.values(), int(back.group(1)), int(back0.group(1))]) and not run.leftovers()
    finally:
        if stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
        if run.proc.poll() is None:
            run.proc.kill()


def test_processes_restart_an_actor_lost_during_start_up(tmp_path):
    """actor/0 SIGKILLed right after it registers, while the trainer compiles (before "all workers
    started"): it is restarted like any other loss, configured with its group, and the trial finishes."""
    run = Launch(tmp_path, "startup", f"total_env_steps={2 * 4 * 32 * 6}", "layout.restart_backoff_seconds=0.2")
    try:
        run.wait_for(r"all \d+ workers registered", timeout=240)
        assert "all workers started" not in run.output
        pid = run.worker_pids()["actor/0"]
        os.kill(pid, signal.SIGKILL)
        run.wait_for(rf"restarting worker actor/0 \(pid {pid}\) in 0.2 s", timeout=30)
        run.wait_for(r"worker actor/0 \(pid \d+\) is back after", timeout=240)
        assert run.wait(timeout=300) == 0, run.output
        started = run.output.index("all workers started")
        assert run.output.index("restarting worker actor/0") < started, run.output  # lost during start-up
        status = run.status()
        assert (status["exit_code"], status["reason"]) == (0, "done"), status
        assert status["restarts"]["by_worker"] == {"actor/0": 1}
        assert [m["update"] for m in read_jsonl(run.run_dir / "metrics.jsonl")] == list(range(1, 7))
        assert not run.leftovers()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()


@pytest.mark.parametrize("inference,every", [("inline", 4), ("remote", 0)])
def test_processes_restart_a_sigkilled_trainer(tmp_path, inference, every):
    """trainer/0 SIGKILLed mid-run: with ``checkpoint.every_updates=4`` after its checkpoint of update 4, it
    comes back from that checkpoint; without checkpoints (and with remote inference, the default) from
    update 0. The actors follow it to its new addresses and back down to its params version, and the
    trial finishes with one metrics line per update (lines after the checkpoint are logged again, the
    predecessor's go to ``metrics.discarded.jsonl``)."""
    run = Launch(tmp_path, "trainer", f"total_env_steps={2 * 4 * 32 * 16}", f"layout.inference={inference}",
                 "layout.restart_backoff_seconds=0.2", f"checkpoint.every_updates={every}")
    try:
        run.wait_for(r"all workers started", timeout=240)
        wait_for_updates(run, 6, timeout=180)
        deadline = time.monotonic() + 60  # orbax finishes the checkpoint of update 4 in the background
        while every and not (run.run_dir / "checkpoints" / "4").is_dir():
            assert time.monotonic() < deadline, list((run.run_dir / "checkpoints").iterdir())
            time.sleep(0.1)
        pids = run.worker_pids()
        os.kill(pids["trainer/0"], signal.SIGKILL)
        run.wait_for(rf"restarting worker trainer/0 \(pid {pids['trainer/0']}\) in 0.2 s", timeout=30)
        back = run.wait_for(r"worker trainer/0 \(pid (\d+)\) is back after", timeout=240)
        assert int(back.group(1)) != pids["trainer/0"]
        assert run.wait(timeout=300) == 0, run.output
        status = run.status()
        assert (status["exit_code"], status["reason"]) == (0, "done"), status
        assert status["restarts"]["by_worker"] == {"trainer/0": 1}
        log = (run.run_dir / "logs" / "trainer-0.log").read_text()
        resumed = re.search(r"resumed from the checkpoint of update (\d+)", log)
        if every:
            assert resumed and int(resumed.group(1)) >= 4, log[-2000:]
        else:
            assert not resumed and (run.run_dir / "metrics.discarded.jsonl").exists(), log[-2000:]
        metrics = read_jsonl(run.run_dir / "metrics.jsonl")
        updates = [m["update"] for m in metrics]
        assert updates == list(range(1, 17)), updates
        steps = [m["env_steps"] for m in metrics]
        assert steps == sorted(steps), steps  # counted on from the checkpoint (or from 0), never twice
        assert not run.leftovers()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()


def test_slurm_restart_steps_without_a_cluster(tmp_path):
    """The Slurm backend's restart bookkeeping (the real thing: tests/slurm/test_slurm_restart.py): a
    restarted worker's exit is its own step's, not its old group step's, and its step is ended on
    ``kill`` and at ``shutdown``."""
    from launch.slurm.controller import GroupSteps
    from launch.slurm.sbatch import kill_command, resolved, restart_command
    from srljax.config import apply_overrides, load_file

    cfg = resolved(apply_overrides(load_file(ROOT / "configs" / "cartpole_ppo_distributed.py"), [f"log.run_root={tmp_path}"]))
    assert restart_command(cfg, "actor", 1, "n2") == [
        "srun", "--het-group=1", "--overlap", "--nodes=1", "--ntasks=1", "--cpus-per-task=1", "--mem-per-cpu=2048M",
        "--nodelist=n2", cfg.slurm.python, "-m", "launch.slurm.task", str(cfg.run_dir), "actor", "1"]
    assert kill_command(cfg, "policy", "n1", 4242) == [
        "srun", "--het-group=0", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n1", "kill", "-KILL", "4242"]

    kills: list[tuple[str, str, int]] = []
    runs = {"actor/1": "import time; time.sleep(60)"}

    def restart(role: str, index: int, node: str) -> list[str]:
        return [sys.executable, "-c", runs[f"{role}/{index}"]]

    def kill(role: str, node: str, pid: int) -> list[str]:
        kills.append((role, node, pid))
        return ["true"]

    steps = GroupSteps(tmp_path, {"actor": 2}, (restart, kill), where=lambda name: {"pid": 4242, "node": "n2"})
    (tmp_path / "slurm" / "exit").mkdir(parents=True)
    (tmp_path / "slurm" / "exit" / "actor").write_text("137\n")  # its group's step ended
    assert steps.exited() == {"actor/0": 137, "actor/1": 137}
    steps.start("actor", 1)  # started by the batch script: nothing to do
    assert not steps.own
    steps.kill("actor/1")
    assert kills == [("actor", "n2", 4242)] and steps.exited() == {"actor/0": 137}
    steps.start("actor", 1)
    assert steps.exited() == {"actor/0": 137}  # its own step runs
    steps.kill("actor/1")  # ends that step too
    assert not steps.own and len(kills) == 2
    runs["actor/1"] = "raise SystemExit(3)"
    steps.start("actor", 1)
    deadline = time.monotonic() + 30
    while "actor/1" not in steps.exited() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert steps.exited() == {"actor/0": 137, "actor/1": 3}
    runs["actor/1"] = "import time; time.sleep(60)"
    steps.kill("actor/1")
    steps.start("actor", 1)
    assert steps.shutdown(grace_s=0.5) == ["actor/1"]  # still running after the grace: ended


# -- chaos ---------------------------------------------------------------------------------------------
CHAOS_ROLES = ("actor", "policy", "buffer")
KILL_EVERY_S = 15.0


def chaos(run: Launch, stop: threading.Event, killed: list[tuple[str, int]], seed: int) -> None:
    """Every ``KILL_EVERY_S`` SIGKILL a random running non-trainer worker, each role first once."""
    rng = random.Random(seed)
    while not stop.wait(KILL_EVERY_S):
        running = {}
        for path in (run.run_dir / "workers").glob("*.jsonl"):
            last = read_jsonl(path)[-1:]
            if last and last[0]["role"] in CHAOS_ROLES and last[0]["state"] == "running":
                running[f"{last[0]['role']}/{last[0]['index']}"] = int(last[0]["pid"])
        untried = [n for n in running if n.split("/")[0] not in {k.split("/")[0] for k, _ in killed}]
        pool = sorted(untried or running)
        if not pool:
            continue
        name = rng.choice(pool)
        try:
            psutil.Process(running[name])  # still there (it may have just been restarted)
            os.kill(running[name], signal.SIGKILL)
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
        killed.append((name, running[name]))
        print(f"chaos: SIGKILL {name} (pid {running[name]}) at {time.strftime('%H:%M:%S')}", flush=True)


@pytest.mark.slow
def test_chaos_cartpole_survives_a_sigkill_every_15_s(tmp_path):
    """The issue's chaos test: CartPole distributed (4 actors, 1 policy worker with remote inference,
    1 buffer, 1 trainer), a random non-trainer worker SIGKILLed every 15 s; completes, exit 0,
    reaches a mean return >= 475 and reports every restart."""
    run = Launch(tmp_path, "chaos", "layout.num_actors=4", "layout.num_buffer_workers=1", "layout.max_restarts=1000",
                 "algo.num_steps=128", "trainer.num_minibatches=8", "trainer.update_epochs=4", "layout.ring_size=1",
                 "checkpoint.every_updates=20")
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=chaos, args=(run, stop, killed, 13), daemon=True)
    try:
        run.wait_for(r"all workers started", timeout=300)
        killer.start()
        wait_for_updates(run, 150, timeout=1800)  # and the trainer once, mid-run: it comes back from update 140
        trainer = run.worker_pids()["trainer/0"]
        os.kill(trainer, signal.SIGKILL)
        killed.append(("trainer/0", trainer))
        code = run.wait(timeout=3600)
        stop.set()
        killer.join(timeout=5)
        status = run.status()
        print(f"chaos: exit {code}, {len(killed)} kills: {killed}\nrestarts: {status.get('restarts')}")
        assert code == 0, run.output
        assert (status["exit_code"], status["reason"]) == (0, "done"), status
        assert {name.split("/")[0] for name, _ in killed} == {*CHAOS_ROLES, "trainer"}, killed
        assert status["restarts"]["by_worker"].get("trainer/0") == 1, status["restarts"]
        assert status["restarts"]["total"] >= len(killed) - 1  # a kill during the last stop is not restarted
        metrics = read_jsonl(run.run_dir / "metrics.jsonl")
        assert [m["update"] for m in metrics] == list(range(1, metrics[-1]["update"] + 1))  # no gap, no repeat
        returns = [m.get("episode_return", 0.0) for m in metrics]
        print(f"chaos: final return {returns[-1]:.1f}, best {max(returns):.1f}, updates {metrics[-1]['update']}")
        assert max(returns) >= 475, returns[-20:]
        assert "finished: done" in run.output and "worker restarts (" in run.output
        assert not run.leftovers()
    finally:
        stop.set()
        if run.proc.poll() is None:
            run.proc.kill()
