"""Time to the first metrics line, cold and warm persistent compilation cache (issue 27, "compile once").

    python bench/compile_once.py                        # cartpole_ppo.py, single process and distributed
    python bench/compile_once.py --config configs/cartpole_dqn.py --runs 2

For each config: a fresh cache folder, then ``--runs`` launches of ``python -m launch.local CONFIG
compile_cache=FOLDER``, each timed from its start to the first line in its ``metrics.jsonl`` (the process is
then killed: the rest of the run is not what the cache changes), and one launch with ``compile_cache=off``
as the baseline. Prints one row per launch: seconds to the first line, its ratio to the cold run, and
the entries in the cache folder after it (a distributed run's workers all write to the one folder).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

LAUNCH_TIMEOUT_S = 600.0


def first_line_s(config: str, cache: str, run_root: Path, trial: str, extra: list[str]) -> float:
    """Seconds from launching ``config`` to the first line of its metrics.jsonl; the process is then stopped."""
    cmd = [sys.executable, "-m", "launch.local", config, "-e", "compile_once", "-f", trial,
           f"compile_cache={cache}", f"log.run_root={run_root}", "log.progress=lines", *extra]
    metrics = run_root / "compile_once" / trial / "metrics.jsonl"
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        while time.perf_counter() - start < LAUNCH_TIMEOUT_S:
            if metrics.exists() and metrics.read_text().strip():
                return time.perf_counter() - start
            if proc.poll() is not None:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} before its first metrics line: "
                                   f"{proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{' '.join(cmd)}: no metrics line in {LAUNCH_TIMEOUT_S:.0f} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def entries(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="config file (repeatable); default: cartpole_ppo.py "
                        "and cartpole_ppo_distributed.py")
    parser.add_argument("--runs", type=int, default=2, help="launches per config with the cache (first is cold)")
    args = parser.parse_args(argv)
    configs = args.config or ["configs/cartpole_ppo.py", "configs/cartpole_ppo_distributed.py"]
    print(describe(), flush=True)
    print(f"{'config':<40} {'cache':<6} {'first line s':>12} {'vs cold':>8} {'entries':>8}", flush=True)
    with tempfile.TemporaryDirectory(prefix="srljax-compile-once-") as tmp:
        for n, config in enumerate(configs):
            folder, runs = Path(tmp) / f"cache{n}", Path(tmp) / f"runs{n}"
            cold = None
            for i in range(args.runs):
                s = first_line_s(config, str(folder), runs, f"cached{i}", [])
                cold = cold or s
                label = "cold" if i == 0 else "warm"
                print(f"{config:<40} {label:<6} {s:12.1f} {s / cold:8.2f} {entries(folder):8d}", flush=True)
            s = first_line_s(config, "off", runs, "off", [])
            print(f"{config:<40} {'off':<6} {s:12.1f} {s / cold:8.2f} {'-':>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
