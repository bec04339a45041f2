"""Predicted against measured: ``launch.plan --measure``, the plan for this machine, then the planned run.

    python bench/plan_check.py                                  # synthetic 1 ms and 10 ms, CartPole
    python bench/plan_check.py --cases cartpole --updates 30
    python bench/plan_check.py --cases pong --out rows.jsonl --root /tmp/pong_plan    # keeps the unit costs there
    bash tests/slurm/cluster.sh exec env SRLJAX_PRIORITY=1 /work/main/.venv/bin/python bench/plan_check.py \
        --cases synthetic_10ms --slurm --nodes 3 --cores-per-node 1 --max-actors 8 slurm.actor.mem_gb_per_task=1

Per case: ``python -m launch.plan CFG OVERRIDES --measure`` (unit costs), ``python -m launch.plan CFG OVERRIDES
--nodes 1 --cores-per-node <this machine's cores> --write PLAN.py --json PLAN.json``, then ``python -m
launch.local PLAN.py`` for ``--updates`` updates (each a subprocess, as a user runs them, under a temporary run
root, or ``--root``). With ``--slurm`` the plan is for ``--nodes`` x ``--cores-per-node`` and the planned run is
``python -m launch.slurm PLAN.py`` (run it inside ``tests/slurm/cluster.sh exec`` for the throw-away cluster: its
nodes share this machine's cores). Measured env steps/s are the trainer's, from ``metrics.jsonl`` between the update that ends the warm-up
(``--warmup`` of the updates) and the last; the measured policy lag is ``lag/mean`` averaged over those lines.
On a shared machine other jobs take cores from the planned run, so each row also gives the cores every
other process used during the steady window (``/proc/stat`` less the run's own process tree, as
``bench/scaling.py`` counts them), the same model's prediction at the cores that left (``srljax.sizing.predict``
with ``cores - others``), and the CPU per env step the model predicts against what the run's processes spent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scaling import launch_watched, steady_cpu  # bench/scaling.py, next to this script

from srljax.sizing import Choice, Cluster, Costs, placement, predict, role_cpu

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]
SYNTHETIC = ["env.factory=envs.synthetic:make_synthetic", "env.options.obs_shape=4", "algo.num_steps=32",
             "trainer.update_epochs=1", "trainer.num_minibatches=1"]
CASES: dict[str, tuple[str, list[str], list[int]]] = {  # config, overrides, env counts the plan picks among
    "synthetic_1ms": ("configs/cartpole_ppo.py", [*SYNTHETIC, "env.options.step_ms=1"], [16, 64, 256]),
    "synthetic_10ms": ("configs/cartpole_ppo.py", [*SYNTHETIC, "env.options.step_ms=10"], [16, 64, 256]),
    "cartpole": ("configs/cartpole_ppo.py", [], [16, 64]),
    "pong": ("configs/atari_ppo.py", ["trainer.overlap_collection=false"], [4, 8, 16]),  # distributed: no overlap
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"failed (exit {out.returncode}): {' '.join(cmd)}")
    return out


def check(name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    config, overrides, counts = CASES[name]
    counts = args.env_counts or counts
    given = [f"log.run_root={root}", *COMMON, *overrides, *args.extra]
    py = [sys.executable, "-m", "launch.plan", config, *given]
    start = time.monotonic()
    if not args.no_measure:
        run([*py, "--measure", "--seconds", str(args.seconds), "--env-counts", *map(str, counts)])
    measured_s = time.monotonic() - start
    plan_py, plan_json = root / f"plan_{name}.py", root / f"plan_{name}.json"
    cores = args.cores or os.cpu_count()
    nodes, per_node = (args.nodes, args.cores_per_node or cores) if args.slurm else (1, cores)
    out = run([*py, "--nodes", str(nodes), "--cores-per-node", str(per_node), "--write", str(plan_py), "--json",
               str(plan_json), "--max-actors", str(args.max_actors)])
    print(out.stdout, flush=True)
    plan = json.loads(plan_json.read_text())
    per_update = plan["choice"]["actors"] * plan["choice"]["envs"] * plan["steps"]
    load = os.getloadavg()[0]
    trial = f"{name}-{time.monotonic_ns()}"
    run_dir = root / "plan_check" / trial
    launcher = "launch.slurm" if args.slurm else "launch.local"
    out, samples = launch_watched([sys.executable, "-m", launcher, str(plan_py), "-e", "plan_check", "-f", trial,
                                   f"total_env_steps={per_update * args.updates}"], run_dir / "metrics.jsonl",
                                  job_result=run_dir / "slurm" / "result.json" if args.slurm else None)
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    first = max(1, int(args.updates * args.warmup))
    steady = [m for m in metrics if m["update"] >= first]
    if out.returncode or len(steady) < 2:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"{name}: the planned run failed or wrote too few metrics lines; see {run_dir}")
    dt = steady[-1]["time"] - steady[0]["time"]
    sps = (steady[-1]["env_steps"] - steady[0]["env_steps"]) / dt
    lags = [m["lag/mean"] for m in steady[1:] if "lag/mean" in m]
    workers, others = steady_cpu(samples, len(metrics) - len(steady) + 1, len(metrics))
    ours = sum(workers.values())
    costs = Costs.from_dict(json.loads(Path(plan["costs"]).read_text()))
    choice = Choice(**plan["choice"])
    predicted = plan["prediction"]["sps"]
    # the same model at the cores this run's processes were left by the other jobs on the machine
    # (on the throw-away Slurm cluster every node shares this machine's cores: the same one-node sum)
    got = predict(costs, choice, Cluster(1, max(cores - others, 0.05)), plan["max_policy_lag"])
    # at the measured rate: the CPU per env step of every role, and the workers' fixed cores spread over those steps
    fixed = sum(load.fixed_cores for load in placement(choice, costs, Cluster(nodes, per_node)))
    cpu_step = sum(role_cpu(costs, choice).values()) + fixed / sps
    return {"case": name, "layout": " ".join(plan["overrides"][1:8]), "predicted_sps": round(predicted),
            "measured_sps": round(sps), "ratio": round(sps / predicted, 3), "bound": plan["prediction"]["bound"],
            "predicted_lag": round(plan["prediction"]["lag"], 2),
            "measured_lag": round(sum(lags) / len(lags), 2) if lags else None, "load_1m": round(load, 2),
            "other_cores": round(others, 2), "our_cores": round(ours, 2),
            "predicted_sps_at_cores_left": round(got.sps), "ratio_at_cores_left": round(sps / got.sps, 3),
            "bound_at_cores_left": got.bound, "predicted_cpu_ms_per_1k_steps": round(cpu_step * 1e6, 1),
            "measured_cpu_ms_per_1k_steps": round(ours / sps * 1e6, 1) if sps else None,
            "workers_cores": workers, "measure_s": round(measured_s, 1), "cores": cores,
            "cluster": f"{nodes} x {per_node}" + (" (Slurm)" if args.slurm else ""), "load_at_end": [round(x, 2) for x in os.getloadavg()]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["synthetic_1ms", "synthetic_10ms", "cartpole"],
                        choices=list(CASES))
    parser.add_argument("--updates", type=int, default=20, help="updates of each planned run")
    parser.add_argument("--warmup", type=float, default=0.3, help="share of the updates left out")
    parser.add_argument("--seconds", type=float, default=1.0, help="launch.plan --measure: seconds per unit")
    parser.add_argument("--env-counts", type=int, nargs="+", default=[],
                        help="envs per actor the plan picks among (default: each case's own)")
    parser.add_argument("--cores", type=int, default=0, help="cores to plan for (default: this machine's)")
    parser.add_argument("--max-actors", type=int, default=0, help="plan at most this many actors (a shared machine)")
    parser.add_argument("--no-measure", action="store_true",
                        help="plan from the unit costs an earlier --measure left under --root (Pong's take minutes)")
    parser.add_argument("--out", default="", help="append one JSON line per case here")
    parser.add_argument("--root", default="", help="run root to keep (unit costs, plans, runs); default: a temporary one")
    parser.add_argument("--slurm", action="store_true", help="plan for --nodes x --cores-per-node, run with launch.slurm")
    parser.add_argument("--nodes", type=int, default=3, help="--slurm: nodes to plan for")
    parser.add_argument("--cores-per-node", type=int, default=0, help="--slurm: cores per node (default: --cores)")
    parser.add_argument("extra", nargs="*", help="key=value overrides for every case")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="plan_check_") as tmp:
        if args.root:
            tmp = args.root
            Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in args.cases:
            rows.append(check(name, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rows[-1]) + "\n")
    print("\n| case | planned layout | predicted env steps/s (bound) | measured | measured / predicted | other jobs' "
          "cores | predicted at the cores left (bound) | measured / that | CPU ms per 1k steps pred / meas "
          "| lag pred / meas |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['layout']} | {r['predicted_sps']:,} ({r['bound']}) | {r['measured_sps']:,} | "
              f"{r['ratio']:.2f} | {r['other_cores']} | {r['predicted_sps_at_cores_left']:,} ({r['bound_at_cores_left']}) "
              f"| {r['ratio_at_cores_left']:.2f} | {r['predicted_cpu_ms_per_1k_steps']} / "
              f"{r['measured_cpu_ms_per_1k_steps']} | {r['predicted_lag']} / {r['measured_lag']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
