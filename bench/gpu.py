"""The GPU checks in one command (< 8 minutes): run it wherever a GPU is available.

    python bench/gpu.py                # on a machine without a GPU: prints "no GPU" and exits 0
    python bench/gpu.py --quick        # shorter runs (a smoke test of the script itself, ~3 minutes)

Five measurements, each a subprocess with its own time limit, as a user would run them:

1. **sharded trainer update on the GPU**: ``bench/sharding.py`` (the distributed trainer's real path, Atari
   PPO update of a Nature CNN on Pong-shaped batches), samples/s on the GPU next to the same command on the
   CPU (``JAX_PLATFORMS=cpu``), and their ratio;
2. **a policy worker on the GPU serving 8 actors**: ``launch.local configs/atari_ppo.py`` laid out as
   8 actors x 8 envs, remote inference, one policy worker (``layout.policy_device=gpu``), the trainer on
   the GPU too; inference rows/s at the policy worker, the actors' round trip p50 / p99;
3. **device placement**: in that run, which devices each process computed on (the ``jax devices:`` line
   every worker logs after setup), against what README's "GPU placement" says: trainer and policy worker
   on ``cuda``, actors on ``cpu``;
4. **Pong PPO with the trainer on the GPU**: ``configs/atari_ppo.py`` in one process, env steps/s
   after the first updates;
5. **the Anakin path**: ``configs/gymnax_cartpole_ppo.py``, ``minatar_breakout_ppo.py`` and ``brax_hopper_ppo.py``
   (env, rollout and update in one program on the GPU), env steps/s after the first calls.

It prints one table in the form of ``bench/RESULTS.md``; exit 0 only if every measurement ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe  # bench/machine.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]


def gpu_count() -> int:
    """GPUs jax sees (0 without a CUDA jax or a device), asked in a subprocess so this one stays light."""
    probe = "import jax\ntry:\n    print(len(jax.devices('gpu')))\nexcept RuntimeError:\n    print(0)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, **(env or {})})
        return out.returncode, out.stdout + out.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as error:
        text = (error.stdout or b"").decode() + (error.stderr or b"").decode() if isinstance(error.stdout, bytes) \
            else (error.stdout or "") + (error.stderr or "")
        return 124, text, time.monotonic() - start


def samples_per_s(text: str) -> float | None:
    """The first ``samples/s`` figure ``bench/sharding.py`` printed (one device)."""
    found = re.findall(r"([\d,]+(?:\.\d+)?) samples/s", text)
    return float(found[0].replace(",", "")) if found else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def steady_sps(metrics: list[dict[str, Any]], skip: int) -> float | None:
    if len(metrics) < skip + 2:
        return None
    a, b = metrics[skip], metrics[-1]
    return (b["env_steps"] - a["env_steps"]) / max(b["time"] - a["time"], 1e-9)


def update_check(quick: bool) -> list[str]:
    args = ["bench/sharding.py", "--envs", "8", "--repeats", "3" if quick else "10"]
    rc_gpu, gpu_text, gpu_s = run([sys.executable, *args, "--devices", "1"], 240)
    rc_cpu, cpu_text, cpu_s = run([sys.executable, *args[:2], "8", "--repeats", "2", "--epochs", "1", "--throughput",
                                   "--devices", "1"], 240, env={"JAX_PLATFORMS": "cpu"})
    gpu, cpu = samples_per_s(gpu_text), samples_per_s(cpu_text)
    if rc_gpu or gpu is None:
        return [f"| sharded trainer update (Pong PPO, 1 GPU) | not measured (exit {rc_gpu}): "
                f"{gpu_text.strip().splitlines()[-1] if gpu_text.strip() else 'no output'} | |"]
    # the CPU row runs 1 epoch instead of 4 (4 would take minutes): its samples/s is per epoch-pass, as the GPU's
    ratio = f"{gpu / cpu:.1f}x" if cpu else "-"
    return [f"| sharded trainer update (Pong PPO, Nature CNN, batch 8 x 128) | {gpu:,.0f} samples/s on the GPU "
            f"({gpu_s:.0f} s) | CPU: {cpu or float('nan'):,.0f} samples/s (1 epoch; exit {rc_cpu}); GPU/CPU {ratio} |"]


def policy_and_placement(quick: bool, root: Path) -> list[str]:
    updates = 6 if quick else 12
    trial = "gpu-policy"
    cmd = [sys.executable, "-m", "launch.local", "configs/atari_ppo.py", "-e", "gpu", "-f", trial,
           f"log.run_root={root}", *COMMON, "layout.mode=distributed", "layout.num_actors=8", "env.num_envs=8",
           "trainer.batch_envs=64", "layout.inference=remote", "layout.num_policy_workers=1",
           "layout.policy_device=gpu", "layout.memory_fraction=0.2", f"total_env_steps={updates * 64 * 128}"]
    rc, text, wall = run(cmd, 300)
    run_dir = root / "gpu" / trial
    rows = []
    actors = [read_jsonl(p) for p in sorted((run_dir / "workers").glob("actor-*.jsonl"))]
    policy = read_jsonl(run_dir / "workers" / "policy-0.jsonl")
    p50 = [a[-1].get("latency/inference_ms/p50") for a in actors if a and "latency/inference_ms/p50" in a[-1]]
    p99 = [a[-1].get("latency/inference_ms/p99") for a in actors if a and "latency/inference_ms/p99" in a[-1]]
    rows_per_s = None
    if len(policy) >= 2 and "rows" in policy[-1]:
        a, b = policy[len(policy) // 2], policy[-1]
        rows_per_s = (b["rows"] - a.get("rows", 0)) / max(b["time"] - a["time"], 1e-9) if "time" in b else None
    latency = (f"round trip p50 {statistics.median(p50):.1f} ms, p99 {max(p99):.1f} ms (over actors)"
               if p50 and p99 else "round trip not in workers/actor-*.jsonl")
    rows.append(f"| policy worker on the GPU, 8 actors x 8 envs (Pong, remote) | "
                f"{f'{rows_per_s:,.0f} rows/s' if rows_per_s else 'rows/s not measured'}; {latency} | exit {rc}, "
                f"{wall:.0f} s |")
    seen = dict(re.findall(r"\[(\w+-\d+) pid=\d+\] jax devices: (.+)", text))
    want = {"trainer-0": "gpu", "policy-0": "gpu", **{f"actor-{i}": "cpu" for i in range(8)}}
    wrong = [f"{name} on {seen.get(name, 'not logged')}" for name, kind in want.items()
             if kind not in seen.get(name, "")]
    rows.append(f"| device placement (README) | trainer-0: {seen.get('trainer-0', '?')}, policy-0: "
                f"{seen.get('policy-0', '?')}, actors: {sorted({seen.get(f'actor-{i}', '?') for i in range(8)})} | "
                f"{'as described' if not wrong else 'NOT as described: ' + ', '.join(wrong)} |")
    return rows


def pong_single(quick: bool, root: Path) -> list[str]:
    updates = 8 if quick else 20
    cmd = [sys.executable, "-m", "launch.local", "configs/atari_ppo.py", "-e", "gpu", "-f", "pong",
           f"log.run_root={root}", *COMMON, f"total_env_steps={updates * 8 * 128}"]
    rc, text, wall = run(cmd, 300)
    sps = steady_sps(read_jsonl(root / "gpu" / "pong" / "metrics.jsonl"), skip=2)
    return [f"| Pong PPO, one process, trainer on the GPU (configs/atari_ppo.py) | "
            f"{f'{sps:,.0f} env steps/s' if sps else 'not measured'} | exit {rc}, {wall:.0f} s |"]


ANAKIN = (("CartPole (gymnax)", "configs/gymnax_cartpole_ppo.py", 40),
          ("MinAtar Breakout (gymnax)", "configs/minatar_breakout_ppo.py", 40),
          ("Hopper (brax)", "configs/brax_hopper_ppo.py", 40))


def anakin_rows(quick: bool, root: Path) -> list[str]:
    """The Anakin path (env, rollout and update in one program on the GPU) beside the envpool rows above; needs
    ``pip install -e '.[jaxenvs]'`` (a family that is not installed is reported as not measured)."""
    rows = []
    for name, config, updates in ANAKIN:
        trial = Path(config).stem
        cmd = [sys.executable, "-m", "launch.local", config, "-e", "gpu", "-f", trial, f"log.run_root={root}", *COMMON,
               "log.log_every=1", f"total_env_steps={(updates // (2 if quick else 1)) * 64 * 128}"]
        rc, text, wall = run(cmd, 600)
        sps = steady_sps(read_jsonl(root / "gpu" / trial / "metrics.jsonl"), skip=2)
        rows.append(f"| Anakin: {name}, one program on the GPU ({config}) | "
                    f"{f'{sps:,.0f} env steps/s' if sps else 'not measured'} | exit {rc}, {wall:.0f} s |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    gpus = gpu_count()
    if not gpus:
        print("no GPU: jax sees no CUDA device on this machine, so bench/gpu.py measured nothing (bench/RESULTS.md "
              "says which GPU figures exist)")
        return 0
    print(f"machine: {describe()}", flush=True)
    start = time.monotonic()
    lines = ["| measurement | figure | notes |", "| --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="srljax-gpu-") as tmp:
        for check in (lambda: update_check(args.quick), lambda: policy_and_placement(args.quick, Path(tmp)),
                      lambda: pong_single(args.quick, Path(tmp)), lambda: anakin_rows(args.quick, Path(tmp))):
            rows = check()
            lines += rows
            print("\n".join(rows), flush=True)
    print(f"\n{gpus} GPU(s); {time.monotonic() - start:.0f} s in all\n" + "\n".join(lines))
    failed = [x for x in lines if "not measured" in x or "NOT as described" in x]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
