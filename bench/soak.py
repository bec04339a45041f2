"""Soak: a distributed layout for a set time with random worker kills; RSS, restarts, drops, learning.

    python bench/soak.py                                  # 60 minutes of CartPole distributed, a kill every 120 s
    python bench/soak.py --minutes 10 --kill-every 60     # a short one
    python bench/soak.py --config configs/mujoco_ppo_distributed.py --minutes 60

Runs ``python -m launch.local CONFIG`` (a very large ``total_env_steps``, ``layout.max_restarts``
high enough for every kill) and, every ``--sample-every`` seconds, reads the RSS of every worker
process (``/proc/PID/status``) and the controller/launcher. Every ``--kill-every`` seconds it
SIGKILLs one random non-trainer worker (actor, policy or buffer worker), which the controller
restarts. At the end it stops the trial with SIGTERM (final checkpoint) and prints, per worker
process that lived past the warm-up: its RSS at the end of the warm-up (default the first 5
minutes of its life) and at its end, and the growth; the restarts the controller recorded; the
dropped and invalid samples; and the learning curve's last return. Writes ``soak.json`` (every
sample) and ``soak_rss.png`` (RSS over time per worker) to ``--out`` (default: the run folder).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe  # noqa: E402

WORKER_MODULE = "srljax.system.shell.run"


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def workers(run_dir: Path) -> dict[int, str]:
    """{pid: "role/i"} of the live worker processes of this run (from their command lines)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmd if a]
        if WORKER_MODULE in args and str(run_dir) in args:
            i = args.index(WORKER_MODULE)
            if len(args) > i + 3:
                found[int(proc.name)] = f"{args[i + 2]}/{args[i + 3]}"
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cartpole_ppo_distributed.py")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--kill-every", type=float, default=120.0, help="seconds between kills; 0: no kills")
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    parser.add_argument("--run-root", default="runs/soak")
    parser.add_argument("--out", default="", help="folder for soak.json and soak_rss.png (default: the run folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    print(f"machine: {describe()}", flush=True)
    trial = time.strftime("soak-%Y%m%d-%H%M%S")
    kills_expected = int(args.minutes * 60 / args.kill_every) + 1 if args.kill_every else 0
    cmd = [sys.executable, "-m", "launch.local", args.config, "-f", trial, f"log.run_root={args.run_root}",
           "total_env_steps=1000000000", "log.progress=lines", "log.wandb=disabled",
           f"layout.max_restarts={max(kills_expected, 1)}", "layout.stall_seconds=600", *args.overrides]
    name = Path(args.config).stem
    run_dir = (Path(args.run_root) / name / trial).absolute()
    out = Path(args.out) if args.out else run_dir
    print("running: " + " ".join(cmd), flush=True)
    log = open(Path(os.devnull), "w")
    launcher = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rng = random.Random(args.seed)
    start = time.monotonic()
    samples: list[dict] = []  # {"t", "pid", "name", "rss_mb"}
    born: dict[int, float] = {}
    kills: list[dict] = []
    next_kill = start + args.kill_every if args.kill_every else float("inf")
    try:
        while time.monotonic() - start < args.minutes * 60 and launcher.poll() is None:
            now = time.monotonic()
            live = workers(run_dir)
            for pid, who in {**live, launcher.pid: "launcher/0"}.items():
                born.setdefault(pid, now)
                if (mb := rss_mb(pid)) is not None:
                    samples.append({"t": round(now - start, 1), "pid": pid, "name": who, "rss_mb": round(mb, 1)})
            if now >= next_kill:
                victims = [(pid, who) for pid, who in live.items() if not who.startswith("trainer/")]
                if victims:
                    pid, who = rng.choice(sorted(victims))
                    os.kill(pid, signal.SIGKILL)
                    kills.append({"t": round(now - start, 1), "pid": pid, "name": who})
                    print(f"[soak] {now - start:7.0f} s: SIGKILL {who} (pid {pid})", flush=True)
                next_kill = now + args.kill_every
            time.sleep(args.sample_every)
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    return report(run_dir, out, samples, born, kills, start, args)


def report(run_dir: Path, out: Path, samples: list[dict], born: dict[int, float], kills: list[dict],
           start: float, args: argparse.Namespace) -> int:
    warmup = args.warmup_minutes * 60
    by_pid: dict[int, list[dict]] = {}
    for s in samples:
        by_pid.setdefault(s["pid"], []).append(s)
    rows, worst = [], 0.0
    for pid, series in sorted(by_pid.items(), key=lambda kv: kv[1][0]["name"]):
        t0 = born[pid] - start
        after = [s for s in series if s["t"] >= t0 + warmup]
        if len(after) < 2:
            continue
        growth = after[-1]["rss_mb"] / after[0]["rss_mb"] - 1.0
        worst = max(worst, growth)
        rows.append((series[0]["name"], pid, after[-1]["t"] - after[0]["t"], after[0]["rss_mb"], after[-1]["rss_mb"],
                     growth))
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()] \
        if (run_dir / "metrics.jsonl").exists() else []
    last = metrics[-1] if metrics else {}
    print(f"\nsoak of {args.config}: {args.minutes:g} min, {len(kills)} kills, run folder {run_dir}")
    print(f"{'worker':<12} {'pid':>7} {'span s':>7} {'RSS after warm-up MB':>21} {'RSS end MB':>11} {'growth':>7}")
    for who, pid, span, first, end, growth in rows:
        print(f"{who:<12} {pid:>7} {span:>7.0f} {first:>21.1f} {end:>11.1f} {growth:>+7.1%}")
    print(f"largest RSS growth after the warm-up: {worst:+.1%} (target < +10%)")
    print(f"restarts recorded by the controller: {json.dumps(status.get('restarts', {}))}")
    print(f"outcome: {status.get('reason')} (exit {status.get('exit_code')}); last metrics: update {last.get('update')}, "
          f"env steps {last.get('env_steps', 0):,}, episode_return {last.get('episode_return')}, "
          f"dropped_stale_columns {last.get('dropped_stale_columns')}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps({"config": args.config, "minutes": args.minutes, "kills": kills,
                                               "samples": samples, "status": status,
                                               "curve": [(m.get("env_steps"), m.get("episode_return"))
                                                         for m in metrics]}) + "\n")
    plot(out / "soak_rss.png", by_pid, kills, args)
    print(f"samples: {out / 'soak.json'}; RSS plot: {out / 'soak_rss.png'}")
    return 0 if worst < 0.10 else 1


def plot(path: Path, by_pid: dict[int, list[dict]], kills: list[dict], args: argparse.Namespace) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[test]'): no RSS plot")
        return
    fig, ax = plt.subplots(figsize=(10, 5))
    for pid, series in by_pid.items():
        ax.plot([s["t"] / 60 for s in series], [s["rss_mb"] for s in series], lw=1,
                label=f"{series[0]['name']} ({pid})")
    for k in kills:
        ax.axvline(k["t"] / 60, color="grey", lw=0.5, ls=":")
    ax.axvline(args.warmup_minutes, color="black", lw=0.8, ls="--")
    ax.set_xlabel("minutes (dotted: a kill; dashed: end of the first warm-up)")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(f"soak: {args.config}, {args.minutes:g} min")
    ax.legend(fontsize=6, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
