"""How a distributed trial ends when it cannot finish: hung, silent, starved or out of time.

Each test breaks a real CartPole worker graph in one way and checks the controller ends the
trial within its limit (the tests of a lost worker set ``layout.max_restarts=0``: by default the
controller would restart it, which ``tests/test_system_restart.py`` tests) (plus a margin for a crowded machine), with a non-zero exit code, a
message naming the worker (or the waiting roles) and why, the same outcome in
``RUN_DIR/status.json``, and, for the process backend, no worker process left behind.

* hung: one actor's env blocks forever in ``recv`` (``tests/hanging_env.py``) while its control
  thread keeps heartbeating -> ``lost``, "hung", after ``layout.hang_seconds``;
* silent: one actor SIGSTOPped -> ``lost``, "no heartbeat", after ``layout.heartbeat_timeout_seconds``;
* starved: the trainer can never fill a batch -> ``stalled`` after ``layout.stall_seconds``, naming
  who waits on what;
* ``timeout_seconds`` reached before ``total_env_steps`` -> ``timeout``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from launch.threads import run_threads
from srljax.system.shell.controller import Controller
from srljax.system.shell.worker import HEARTBEAT_S
from tests.hanging_env import AFTER_VAR, MARKER, SEED_VAR, STUCK_SEED_VAR
from tests.test_system_processes import Launch, gone
from tests.test_system_threads import small_config

MARGIN_S = 15.0  # detection is checked every 0.1 s; the rest is a crowded 2-core box
FOREVER = "total_env_steps=50000000"
NO_RESTARTS = "layout.max_restarts=0"  # a lost worker ends the trial, as these tests check


def wait_until(predicate, timeout: float, what: str, run: Launch | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if run is not None and run.proc.poll() is not None:
            run.wait(timeout=5)
            raise AssertionError(f"launcher exited while waiting for {what}:\n{run.output}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s" + (f":\n{run.output}" if run else ""))
        time.sleep(0.2)


def assert_nothing_left(run: Launch, pids: dict[str, int]) -> None:
    assert pids, run.output
    assert gone(list(pids.values())), {n: p for n, p in pids.items() if not gone([p])}
    assert not run.leftovers()


def stop_everything(run: Launch) -> None:
    """After a failed assertion: end the launcher (SIGTERM: it stops its workers), then kill whatever
    worker is left; a worker hung in its env ignores the one SIGTERM it gets when its launcher dies."""
    if run.proc.poll() is None:
        run.proc.terminate()
        try:
            run.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.proc.kill()
    for pid in run.recorded_pids().values():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def ended_after_start(said: list[tuple[float, str]]) -> float:
    """Seconds from the controller's "all workers started" to its "ending the trial"."""
    started = next(t for t, text in said if text == "all workers started")
    ended = next(t for t, text in said if text.startswith("ending the trial"))
    return ended - started


def record_controller(monkeypatch) -> list[tuple[float, str]]:
    said: list[tuple[float, str]] = []
    monkeypatch.setattr(Controller, "say", lambda self, text: said.append((time.monotonic(), text)))
    return said


def test_a_hung_worker_ends_the_trial_naming_it(tmp_path):
    """actor/1's env blocks in ``recv`` forever; its process heartbeats on, so only the loop age tells."""
    hang_s = 5
    # actor i seeds its envs with seed + i * env.num_envs: 1 + 1 * 4 names actor/1
    run = Launch(tmp_path, "hang", FOREVER, NO_RESTARTS, "layout.inference=inline", "env.factory=tests.hanging_env:make_env",
                 f"layout.hang_seconds={hang_s}", environ={SEED_VAR: "5", AFTER_VAR: "300"})
    try:
        log = run.run_dir / "logs" / "actor-1.log"
        wait_until(lambda: log.exists() and MARKER in log.read_text(errors="replace"), 300, "actor/1 hangs", run)
        hung_at = time.monotonic()
        pids = run.worker_pids()
        found = run.wait_for(r"ending the trial: worker actor/1 \(pid (\d+)\) lost: hung", timeout=hang_s + 60)
        took = time.monotonic() - hung_at
        print(f"ended {took:.1f} s after actor/1 hung")
        assert int(found.group(1)) == pids["actor/1"]
        assert hang_s - 1 <= took < hang_s + MARGIN_S, f"ended {took:.1f} s after the hang (hang_seconds={hang_s})"
        assert run.wait(timeout=90) == 1, run.output
        assert f"layout.hang_seconds={hang_s}" in run.output and "FAILED: worker actor/1" in run.output
        status = run.status()
        assert status["exit_code"] == 1 and status["reason"] == "lost"
        assert status["message"].startswith(f"worker actor/1 (pid {pids['actor/1']}) lost: hung")
        assert MARKER in status["message"]  # its last log lines
        killed = [line for line in run.lines if line.startswith("killed after the grace period")]
        assert killed and "actor/1" in killed[0], run.output  # only a kill gets it out of the env
        assert_nothing_left(run, {**pids, **run.recorded_pids()})
    finally:
        stop_everything(run)


def test_a_sigstopped_worker_ends_the_trial_with_no_heartbeat(tmp_path):
    timeout_s = 5.0  # layout.heartbeat_timeout_seconds
    run = Launch(tmp_path, "sigstop", FOREVER, NO_RESTARTS, "layout.inference=inline",
                 f"layout.heartbeat_timeout_seconds={timeout_s}")
    try:
        run.wait_for(r"all workers started", timeout=300)
        actor_log = run.run_dir / "workers" / "actor-0.jsonl"

        def running() -> bool:  # its own metrics say it is stepping
            records = [json.loads(line) for line in actor_log.read_text().splitlines()] if actor_log.exists() else []
            return any(r["state"] == "running" and r.get("env_steps", 0) > 0 for r in records)

        wait_until(running, 120, "actor/0 steps", run)
        time.sleep(2 * HEARTBEAT_S)  # its line says running at once; the controller hears it with the next beat
        pid = run.recorded_pids()["actor/0"]
        assert pid == run.worker_pids()["actor/0"]
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        run.wait_for(rf"ending the trial: worker actor/0 \(pid {pid}\) lost: no heartbeat for", timeout=timeout_s + 60)
        took = time.monotonic() - stopped_at
        print(f"ended {took:.1f} s after SIGSTOP")
        assert timeout_s - 2 <= took < timeout_s + MARGIN_S, f"ended {took:.1f} s after SIGSTOP"
        assert run.wait(timeout=90) == 1, run.output
        status = run.status()
        assert status["exit_code"] == 1 and status["reason"] == "lost"
        assert f"worker actor/0 (pid {pid}) lost: no heartbeat" in status["message"]
        # the launcher killed the stopped process itself (SIGKILL reaches a stopped process)
        assert_nothing_left(run, {**run.worker_pids(), **run.recorded_pids()})
    finally:
        stop_everything(run)  # SIGCONT and SIGKILL to every worker pid, the stopped one included


def test_a_starved_trainer_ends_the_trial_as_stalled(tmp_path, monkeypatch):
    """actor/1's envs stop reporting rows (``tests.hanging_env.StuckColumnsEnv``: every recv returns
    an empty batch): its loop turns and it heartbeats, it just never completes another segment. actor/0 alone may push its share of each batch plus what it is
    allowed ahead, so the trainer starves: the trial ends as stalled, naming who waits on what."""
    stall_s = 6
    said = record_controller(monkeypatch)
    monkeypatch.setenv(STUCK_SEED_VAR, str(1 + 1 * 4))  # actor 1 of 4 envs each: seed + 1 x num_envs
    monkeypatch.setenv(AFTER_VAR, "40")
    cfg = small_config(tmp_path, "layout.inference=inline", "layout.ring_size=1", "env.factory=tests.hanging_env:make_stuck_env",
                       f"layout.stall_seconds={stall_s}", FOREVER)
    assert cfg.seed == 1 and cfg.env.num_envs == 4 and cfg.batch_envs == 8
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "stalled", result.message
    took = ended_after_start(said)
    assert stall_s <= took < stall_s + MARGIN_S + 40, took  # the stall starts after a few updates
    assert result.message.startswith("stalled: no update for ")
    assert f"(layout.stall_seconds={stall_s}; " in result.message
    assert re.search(r"trainer/0 waits for samples: holds [0-7]/8 columns", result.message), result.message
    # actor/0 waits on its throttle, or (its starvation escape fired ~5 s after the last version) steps the
    # segment after the escaped one, which on a loaded machine can still run when the stall is declared
    assert re.search(r"actor/0: (lag throttle: pushed \d+ columns by params version \d+, waits for a newer one|"
                     r"stepping: env columns at rows)", result.message), result.message
    assert "actor/1: env: recv returns no rows" in result.message, result.message  # the stuck one, named
    status = json.loads((Path(cfg.run_dir) / "status.json").read_text())
    assert (status["exit_code"], status["reason"], status["message"]) == (1, "stalled", result.message)


def test_a_throttle_that_can_never_fill_a_batch_is_refused():
    """``max_segments_ahead`` too small for one batch would deadlock (version 0 never advances)."""
    from srljax.prepare import problems

    cfg = small_config(Path("/nonexistent"), "layout.inference=inline", "trainer.batch_envs=16",
                       "layout.max_segments_ahead=1")
    assert any("layout.max_segments_ahead=1 lets 2 actors x 4 envs push 8 columns before the first update, "
               "less than one batch of trainer.batch_envs=16" in p for p in problems(cfg)), problems(cfg)


def test_timeout_before_total_env_steps_fails_the_trial(tmp_path, monkeypatch):
    """Also runs a user-defined role whose ``progress()`` raises until ``setup`` (it runs in the control
    thread, before ``setup`` too): that must not end its heartbeats, or the trial would end as
    ``lost`` ("cannot deliver 'configure'") with the worker's loop still running."""
    timeout_s = 4
    said = record_controller(monkeypatch)
    cfg = small_config(tmp_path, "layout.inference=inline", f"timeout_seconds={timeout_s}", FOREVER,
                       "layout.custom_roles=tests.liveness_roles:CountingWorker")
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "timeout", result.message
    took = ended_after_start(said)  # the clock starts when the workers do, not at launch
    assert timeout_s <= took < timeout_s + MARGIN_S, took
    assert f"timeout_seconds={timeout_s} reached before total_env_steps=50,000,000" in result.message
    status = json.loads((Path(cfg.run_dir) / "status.json").read_text())
    assert (status["exit_code"], status["reason"]) == (1, "timeout")
    for worker in ("actor", "counting"):
        assert result.worker_metrics(worker, 0)[-1]["state"] == "stopped"  # stopped cleanly, not lost
    assert result.worker_metrics("counting", 0)[-1]["polls"] > 0  # it was configured and ran


def test_a_worker_closing_after_stopping_on_its_own_is_not_called_hung(tmp_path):
    """A worker that stops on its own (a signal) and closes slowly (a final checkpoint) is still heartbeating
    while its main loop is in ``close``: the trial ends naming it as stopped, not as a hung loop."""
    cfg = small_config(tmp_path, "layout.inference=inline", FOREVER, NO_RESTARTS, "layout.hang_seconds=5",
                       "layout.custom_roles=tests.liveness_roles:StopsOnItsOwn")
    result = run_threads(cfg)
    assert result.exit_code == 1 and result.reason == "lost", result.message
    assert result.message.startswith("worker stops_on_its_own/0 ("), result.message
    assert "it stopped on its own" in result.message and "hung" not in result.message, result.message
