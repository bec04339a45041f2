"""Two policies on LevelBasedForaging, distributed, then both checkpoints played in one process.

    python bench/two_policies.py                          # configs/lbf_two_policies_distributed.py as is
    python bench/two_policies.py total_env_steps=600000   # overrides go to the launch

Runs ``python -m launch.local configs/lbf_two_policies_distributed.py`` (2 trainers, 1 policy worker, 2
actors as processes) and prints its exit code, wall time (process start to exit, JIT included), and per
policy the curve of ``RUN_DIR/policies/<name>/metrics.jsonl`` (mean team return of the last 20 episodes at
about every tenth of the run). Then it loads both policies' final checkpoints into the single-process
composite (``srljax.learning.policies.load_policy_state``, the ``load=`` path) and plays 64 episodes with them and 64
with uniformly random legal actions (``bench/multi_agent.py``'s ``play``).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
from machine import describe  # bench/machine.py, next to this script
from multi_agent import play, random_policy

import algos
import envs
from srljax.config import LayoutConfig, PolicyConfig, apply_overrides, load_file

CONFIG = "configs/lbf_two_policies_distributed.py"
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    overrides = sys.argv[1:]
    trial = f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    print(describe())
    t0 = time.perf_counter()
    code = subprocess.call([sys.executable, "-m", "launch.local", CONFIG, "-f", trial, "log.wandb=disabled",
                            "log.progress=lines", *overrides], cwd=ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    cfg = apply_overrides(load_file(ROOT / CONFIG), overrides)
    run_dir = ROOT / dataclasses.replace(cfg, trial=trial).run_dir
    print(f"\n{CONFIG}: exit code {code}, wall {wall:.1f} s (launch to exit, JIT included), run folder {run_dir}")
    for name in cfg.policies.training():
        lines = [json.loads(x) for x in (run_dir / "policies" / name / "metrics.jsonl").read_text().splitlines()]
        curve = lines[:: max(1, len(lines) // 10)] + lines[-1:]
        print(f"  {name}: {lines[-1]['update']} updates; curve (env steps: mean return of the last 20 episodes): "
              + ", ".join(f"{m['env_steps']:,}: {m.get('episode_return', float('nan')):.3f}" for m in curve))
    single = dataclasses.replace(cfg, layout=LayoutConfig(), policies=dataclasses.replace(cfg.policies, named=tuple(
        PolicyConfig(p.name, algo=p.algo, trainer=p.trainer, frozen=True,
                     load=str(run_dir / "policies" / p.name / "checkpoints")) for p in cfg.policies.named)))
    from srljax.learning.policies import load_policy_state

    env = envs.make(dataclasses.replace(single.env, num_envs=1, batch_size=0), seed=0)
    spec = env.spec
    env.close()
    algo = algos.make(single, spec)
    params = algo.policy_params({p: load_policy_state(single, p, spec) for p in single.policies.names()})
    act = jax.jit(algo.act)
    trained = lambda obs, key: np.asarray(act(params, obs, (), None, key)[0])  # noqa: E731
    for label, policy in [("random legal", random_policy(spec)), ("both policies, restored", trained)]:
        stats = play(single, policy)
        print(f"  {label:>24}: return {stats['return']:.3f}  length {stats['length']:.1f}  foods eaten "
              f"{stats['deliveries']:.2f}  ended by termination {stats['terminated']:.0%}  (64 episodes, one process)")
    print(describe())


if __name__ == "__main__":
    main()
