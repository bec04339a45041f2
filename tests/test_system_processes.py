"""``python -m launch.local`` with a distributed config: one OS process per worker, clean exits.

Each test starts the launcher as a subprocess, as a user would, and checks what it prints, the
run folder, and that no worker process outlives it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from launch.threads import read_jsonl
from tests.test_system_threads import check_params_norms

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["log.wandb=disabled", "log.progress=lines", "algo.num_steps=32", "trainer.num_minibatches=2",
         "trainer.update_epochs=1", "layout.ring_size=2"]


class Launch:
    """The launcher as a child process, its output collected line by line."""

    def __init__(self, tmp_path: Path, trial: str, *overrides: str, config: str = "configs/cartpole_ppo_distributed.py",
                 environ: dict[str, str] | None = None):
        self.run_dir = tmp_path / Path(config).stem / trial
        cmd = [sys.executable, "-m", "launch.local", config, "-f", trial,
               f"log.run_root={tmp_path}", *SMALL, *overrides]
        env = {**os.environ, **environ} if environ else None  # inherited by every worker process
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            exited = self.proc.poll() is not None
            if exited:
                self._reader.join(timeout=5)  # what it printed last
            found = re.search(pattern, self.output)
            if found:
                return found
            assert not exited, f"launcher exited early:\n{self.output}"
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} not printed within {timeout} s:\n{self.output}")

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"launcher still running after {timeout} s:\n{self.output}") from None
        self._reader.join(timeout=5)
        return code

    def worker_pids(self) -> dict[str, int]:
        found = re.search(r"all \d+ workers registered: (.*)", self.output)
        assert found, self.output
        return {name: int(pid) for name, pid in re.findall(r"(\w+/\d+) \(pid (\d+)\)", found.group(1))}

    def recorded_pids(self) -> dict[str, int]:
        """Every pid a worker stamped on its ``workers/<role>-<i>.jsonl`` lines."""
        out = {}
        for path in sorted((self.run_dir / "workers").glob("*.jsonl")):
            for record in read_jsonl(path):
                out[f"{record['role']}/{record['index']}"] = int(record["pid"])
        return out

    def status(self) -> dict:
        return json.loads((self.run_dir / "status.json").read_text())

    def leftovers(self) -> list[str]:
        """Processes still running that belong to this run (worker command lines name the run folder)."""
        out = []
        for p in psutil.process_iter(["pid", "cmdline", "status"]):
            cmdline = " ".join(p.info["cmdline"] or [])
            if str(self.run_dir) in cmdline and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(f"{p.info['pid']}: {cmdline}")
        return out


def gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def test_local_processes_run_to_completion(tmp_path):
    """``configs/cartpole_ppo_params_norm.py``: the distributed CartPole graph (remote inference) plus
    a user-defined ``params_norm`` worker, which runs as one more process like the built-in roles."""
    run = Launch(tmp_path, "e2e", f"total_env_steps={2 * 4 * 32 * 4}", config="configs/cartpole_ppo_params_norm.py")
    assert run.wait(timeout=240) == 0, run.output
    out = run.output
    assert f"run folder: {run.run_dir}" in out
    for name in ("trainer-0", "policy-0", "actor-0", "actor-1", "params_norm-0"):
        assert str(run.run_dir / "logs" / f"{name}.log") in out
    assert "finished: done" in out
    assert (run.status()["exit_code"], run.status()["reason"]) == (0, "done")
    # the launcher's own console ends with one readable summary (progress lines come every 10 s: none this short)
    summary = out.strip().splitlines()[-1]
    assert re.fullmatch(rf"finished: done, [\d,]+ env steps, 4 updates, recent mean episode return [\d.]+, wall \d+ s; "
                        rf"metrics in {re.escape(str(run.run_dir / 'metrics.jsonl'))}", summary), summary

    pids = run.worker_pids()
    assert set(pids) == {"trainer/0", "policy/0", "actor/0", "actor/1", "params_norm/0"}
    assert len(set(pids.values())) == 5 and run.proc.pid not in pids.values()
    assert run.recorded_pids() == pids
    for name, pid in pids.items():
        role, index = name.split("/")
        last = read_jsonl(run.run_dir / "workers" / f"{role}-{index}.jsonl")[-1]
        assert (last["role"], last["pid"], last["state"]) == (role, pid, "stopped")
        log = (run.run_dir / "logs" / f"{role}-{index}.log").read_text()
        assert f"[{name} pid={pid}]" in log
        if role in ("trainer", "policy", "actor"):  # the light roles run small CPU programs inline (dispatch.py)
            mode = "async" if role == "trainer" else "inline"
            assert re.search(rf"jax devices: cpu:0 \(CPU programs dispatched {mode}\)", log), log[-2000:]
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert metrics and metrics[-1]["update"] == 4
    assert read_jsonl(run.run_dir / "workers" / "params_norm-0.jsonl")[-1]["versions"] >= 2
    check_params_norms(run.run_dir, num_updates=4)
    assert gone(list(pids.values())) and not run.leftovers()


def test_killing_a_worker_ends_the_trial_within_10_s(tmp_path):
    """With ``layout.max_restarts=0``: a lost worker ends the trial (restarts: tests/test_system_restart.py)."""
    run = Launch(tmp_path, "kill", "total_env_steps=50000000", "layout.max_restarts=0")
    run.wait_for(r"all workers started", timeout=240)
    deadline = time.monotonic() + 120
    while not read_jsonl(run.run_dir / "metrics.jsonl"):  # the trainer is updating
        assert time.monotonic() < deadline and run.proc.poll() is None, run.output
        time.sleep(0.2)
    pids = run.worker_pids()
    os.kill(pids["actor/1"], signal.SIGKILL)
    killed_at = time.monotonic()
    run.wait_for(rf"ending the trial: worker actor/1 \(pid {pids['actor/1']}\) lost", timeout=30)
    took = time.monotonic() - killed_at
    assert took < 10, f"the controller took {took:.1f} s to end the trial"
    assert run.wait(timeout=60) == 1, run.output  # the others stop (trainer checkpoint), nothing hangs
    assert "last log lines" in run.output
    assert gone(list(pids.values())) and not run.leftovers()


@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)])
def test_ctrl_c_or_sigterm_stops_every_worker(tmp_path, sig):
    run = Launch(tmp_path, f"sig{int(sig)}", "total_env_steps=50000000")
    run.wait_for(r"all workers started", timeout=240)
    pids = run.worker_pids()
    run.proc.send_signal(sig)
    sent = time.monotonic()
    assert run.wait(timeout=60) == 130, run.output
    print(f"stopped {time.monotonic() - sent:.1f} s after {sig.name}")
    assert "interrupted" in run.output
    assert gone(list(pids.values())) and not run.leftovers()


def test_a_custom_role_that_does_not_import_is_refused_before_anything_starts(tmp_path):
    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-f", "bad",
           f"log.run_root={tmp_path}", *SMALL, "layout.custom_roles=nope.module:X"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "invalid config" in done.stderr
    assert "'nope.module:X': cannot import module 'nope.module'" in done.stderr, done.stderr
    assert "run folder" not in done.stdout  # the launcher never got as far as main()
    assert not (tmp_path / "cartpole_ppo_distributed").exists()  # nothing was created
