"""What the attack rows of ``bench/attacks.py`` share: launching CartPole trials as a user does and reading their run
folders, holding idle connections to a port, a worker's memory, a tmpfs of a given size and filling a disk."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PY = sys.executable
DIST = "configs/cartpole_ppo_distributed.py"
SINGLE = "configs/cartpole_ppo.py"
QUIET = ["log.wandb=disabled", "log.progress=lines"]
LIVE_S = 900  # one live trial at most (a 2-core box under load starts 4 JAX processes slowly)
FD_LIMIT = 1024  # a common cluster default (the flood)
FLOOD = 1100  # idle connections per flood: more than that limit


# -- helpers ---------------------------------------------------------------------------------------------------
def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def launch(args: list[str], *, fd_limit: int | None = None, **kw: Any) -> subprocess.Popen:
    def limit() -> None:
        if fd_limit:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    return subprocess.Popen([PY, *args], cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=limit, **kw)


def finish(proc: subprocess.Popen, timeout: float = LIVE_S) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, out + f"\n(killed after {timeout:g} s)"
    return proc.returncode, out


def run(args: list[str], timeout: float = LIVE_S, **kw: Any) -> tuple[int, str]:
    return finish(launch(args, **kw), timeout)


def metrics(folder: Path) -> list[int]:
    try:
        return [json.loads(line)["update"] for line in (folder / "metrics.jsonl").read_text().splitlines() if line]
    except (OSError, ValueError, KeyError):
        return []


def continuous(updates: list[int]) -> bool:
    return bool(updates) and updates == list(range(1, max(updates) + 1))


def wait_for(check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(every)
    return None


def address(folder: Path, role: str, stream: str) -> str | None:
    for path in (folder / "names").glob("*"):
        if f"{role}%2F0%2F{stream}" in path.name:
            try:
                return json.loads(path.read_text())["value"]
            except (OSError, ValueError, KeyError):
                return None
    return None


def flood(addr: str, n: int = FLOOD, hold_s: float = 10.0) -> int:
    """Hold ``n`` idle TCP connections to ``addr`` for ``hold_s`` (a process with no keys); how many opened."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    try:  # root (or CAP_SYS_RESOURCE) may raise the hard limit too; the flood must not be capped by our own
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, want)), hard))
    host, port = addr.removeprefix("tcp://").rsplit(":", 1)
    conns = []
    for _ in range(n):
        try:
            conns.append(socket.create_connection((host, int(port)), timeout=5))
        except OSError:
            pass
    time.sleep(hold_s)
    for c in conns:
        c.close()
    return len(conns)


def no_traceback_exit2(code: int, out: str, *said: str) -> tuple[str, bool]:
    ok = code == 2 and "Traceback" not in out and all(s in out for s in said)
    last = [line for line in out.strip().splitlines() if line.strip()][-1:] or [""]
    return f"rc {code}: {last[0][:160]}", ok


def dist(root: Path, trial: str, *extra: str) -> list[str]:
    return ["-m", "launch.local", DIST, "-f", trial, f"log.run_root={root}", "total_env_steps=8192",
            "checkpoint.every_updates=2", *QUIET, *extra]


def single(root: Path, trial: str, *extra: str) -> list[str]:
    return ["-m", "launch.local", SINGLE, "-f", trial, f"log.run_root={root}", "total_env_steps=16384",
            "checkpoint.every_updates=2", *QUIET, *extra]


def rss_mib(pid: int) -> float:
    """The process's resident memory in MiB; NaN once it has exited."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def worker_pid(folder: Path, role: str) -> int | None:
    for line in (folder / "logs" / f"{role}-0.log").read_text(errors="replace").splitlines():
        if "pid=" in line:
            return int(line.split("pid=")[1].split("]")[0])
    return None


def mount_tmpfs(where: Path, options: str) -> str:
    where.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    return "" if made.returncode == 0 else (made.stderr.strip() or "mount failed")


def fill_disk(path: Path) -> int:
    """Write ``path`` until the disk is full; the bytes written."""
    written, chunk = 0, b"\0" * (1 << 16)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError:
                break
    with open(path, "ab", buffering=0) as f:  # the last partial blocks
        for _ in range(64):
            try:
                written += f.write(b"\0" * 512)
            except OSError:
                break
    return written
