"""The Anakin path against PureJaxRL and against srljax's envpool loop, and 8 seeds in one program (issue 39).

    python bench/anakin.py --purejaxrl PATH      # PATH: a PureJaxRL checkout (github.com/luchris429/purejaxrl)
    python bench/anakin.py --skip-seeds          # without the 8-seed comparison (~2 minutes less)
    python bench/anakin.py --minatar --purejaxrl PATH   # MinAtar Breakout at 10M steps, both (~20 minutes on 2 cores)

Measured, each as a user runs it, in one go so every figure shares the machine's load:

1. ``configs/gymnax_cartpole_ppo.py`` (4 envs x 128 steps, 4x4 optimiser, 500k steps): the whole process (start to
   exit, compile included), env steps/s of the compiled run (metrics lines after the first call, which compiles),
   the final return;
2. PureJaxRL's ``purejaxrl/ppo.py`` at its own settings (the same), ``DEBUG`` off: compile and compiled-run seconds,
   env steps/s, the return of its last update's finished episodes. gymnax 1.0's ``step`` returns terminated and
   truncated apart, PureJaxRL's wrappers expect one ``done``: a shim joins them (nothing else changes; its wrappers'
   import of navix, for a MiniGrid wrapper not used here, gets an empty module when navix is not installed);
3. ``configs/cartpole_ppo.py`` (envpool) at the same 500k steps: the whole process;
4. 8 seeds: ``seeds=[1..8]`` in one program against the same 8 seeds run one after another as processes, both walls,
   and the largest difference between each seed's metrics lines packed and alone;
5. ``--minatar`` instead: ``configs/minatar_breakout_ppo.py`` and PureJaxRL's ``ppo.py`` at its MinAtar settings
   (those of the config, ``examples/brax_minatar.ipynb``) on ``Breakout-MinAtar``, 10M env steps each.
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

import numpy as np
from machine import describe  # bench/machine.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]
KEYS = ("episode_return", "policy_loss", "value_loss", "entropy")

PUREJAXRL = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1] + "/purejaxrl")
import jax, jax.numpy as jnp
import importlib.util, types
import gymnax.environments.environment as environment
if importlib.util.find_spec("navix") is None:  # PureJaxRL's wrappers import it for a MiniGrid wrapper unused here
    sys.modules["navix"] = types.ModuleType("navix")

_step = environment.Environment.step
def step(self, key, state, action, params=None):  # gymnax 1.0 -> the 5 values PureJaxRL's wrappers unpack
    obs, state, reward, terminated, truncated, info = _step(self, key, state, action, params)
    return obs, state, reward, jnp.logical_or(terminated, truncated), info
environment.Environment.step = step
import ppo
config = {"LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4,
          "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
          "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": False}
config.update(json.loads(sys.argv[2]))
t0 = time.perf_counter()
train = jax.jit(ppo.make_train(config)).lower(jax.random.PRNGKey(30)).compile()
compile_s = time.perf_counter() - t0
t0 = time.perf_counter()
out = jax.block_until_ready(train(jax.random.PRNGKey(30)))
run_s = time.perf_counter() - t0
m = out["metrics"]
last = jnp.where(m["returned_episode"][-1], m["returned_episode_returns"][-1], jnp.nan)
print(json.dumps({"compile_s": compile_s, "run_s": run_s, "sps": config["TOTAL_TIMESTEPS"] / run_s,
                  "return": float(jnp.nanmean(last))}))
"""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def launch(config: str, root: str, trial: str, *overrides: str) -> tuple[float, int, str]:
    cmd = [sys.executable, "-m", "launch.local", config, "-f", trial, f"log.run_root={root}", *COMMON, *overrides]
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return time.monotonic() - start, out.returncode, out.stdout[-2000:] + out.stderr[-2000:]


def compiled_sps(lines: list[dict[str, Any]]) -> float:
    """Env steps/s after the first call's lines (the first call compiles; later lines share a call's time)."""
    first = lines[0]["time"]
    later = [x for x in lines if x["time"] > first]
    a, b = later[0], later[-1]
    return (b["env_steps"] - a["env_steps"]) / max(b["time"] - a["time"], 1e-9)


def purejaxrl(path: str, config: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    out = subprocess.run([sys.executable, "-c", PUREJAXRL, path, json.dumps(config)], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    commit = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    try:
        return json.loads(out.stdout.strip().splitlines()[-1]), commit
    except (ValueError, IndexError):
        return None, (out.stdout + out.stderr)[-600:]


def minatar(args: argparse.Namespace) -> int:
    print(describe(), flush=True)
    root = tempfile.mkdtemp(prefix="anakin-bench-")
    wall, rc, _ = launch("configs/minatar_breakout_ppo.py", root, "minatar")
    lines = read_jsonl(Path(root) / "minatar_breakout_ppo" / "minatar" / "metrics.jsonl")
    rows = [("srljax minatar_breakout_ppo (10M)", f"process {wall:.0f} s, compiled run {compiled_sps(lines):,.0f} env "
             f"steps/s, final return {lines[-1].get('episode_return', float('nan')):.1f}, rc {rc}" if lines else f"rc {rc}")]
    ok = rc == 0
    if args.purejaxrl:
        p, commit = purejaxrl(args.purejaxrl, {"LR": 5e-3, "NUM_ENVS": 64, "TOTAL_TIMESTEPS": 1e7, "NUM_MINIBATCHES": 8,
                                               "ACTIVATION": "relu", "ENV_NAME": "Breakout-MinAtar"})
        ok &= p is not None
        rows.append((f"PureJaxRL ppo.py ({commit}), Breakout-MinAtar 10M", "failed: " + commit if p is None else
                     f"compile {p['compile_s']:.1f} s, compiled run {p['run_s']:.0f} s = {p['sps']:,.0f} env steps/s, "
                     f"last update's return {p['return']:.1f}"))
    print("\n| measurement | figure |\n| --- | --- |")
    for name, figure in rows:
        print(f"| {name} | {figure} |")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--purejaxrl", help="a PureJaxRL checkout; its row is left out without one")
    parser.add_argument("--skip-seeds", action="store_true")
    parser.add_argument("--minatar", action="store_true", help="MinAtar Breakout at 10M steps instead")
    args = parser.parse_args()
    if args.minatar:
        return minatar(args)
    print(describe(), flush=True)
    root = tempfile.mkdtemp(prefix="anakin-bench-")
    rows: list[tuple[str, str]] = []

    wall, rc, tail = launch("configs/gymnax_cartpole_ppo.py", root, "one")
    lines = read_jsonl(Path(root) / "gymnax_cartpole_ppo" / "one" / "metrics.jsonl")
    failed = [] if rc == 0 else [f'gymnax_cartpole_ppo rc {rc}']
    anakin_sps = compiled_sps(lines) if lines else float("nan")
    rows.append(("srljax gymnax_cartpole_ppo (Anakin)", f"process {wall:.1f} s, compiled run {anakin_sps:,.0f} env "
                 f"steps/s, final return {lines[-1].get('episode_return', float('nan')) if lines else 'n/a'}, rc {rc}"))

    if args.purejaxrl:
        p, commit = purejaxrl(args.purejaxrl, {})
        if p is None:
            failed.append("PureJaxRL")
            rows.append(("PureJaxRL ppo.py", f"failed: {commit}"))
        else:
            rows.append((f"PureJaxRL ppo.py ({commit})", f"compile {p['compile_s']:.1f} s, compiled run {p['run_s']:.1f} s"
                         f" = {p['sps']:,.0f} env steps/s, last update's return {p['return']:.1f}"))
            rows.append(("ratio srljax / PureJaxRL (compiled run env steps/s)", f"{anakin_sps / p['sps']:.2f}"))

    wall_envpool, rc, _ = launch("configs/cartpole_ppo.py", root, "envpool")
    failed += [] if rc == 0 else [f"cartpole_ppo rc {rc}"]
    envpool_lines = read_jsonl(Path(root) / "cartpole_ppo" / "envpool" / "metrics.jsonl")
    rows.append(("srljax cartpole_ppo (envpool)", f"process {wall_envpool:.1f} s, final return "
                 f"{envpool_lines[-1].get('episode_return', float('nan')) if envpool_lines else 'n/a'}, rc {rc}"))
    rows.append(("ratio envpool process / Anakin process (same 500k steps)", f"{wall_envpool / wall:.2f}"))

    if not args.skip_seeds:
        seeds = list(range(1, 9))
        packed, rc, _ = launch("configs/gymnax_cartpole_ppo.py", root, "pack", f"seeds={seeds}")
        failed += [] if rc == 0 else [f"8 seeds rc {rc}"]
        alone_wall, worst = 0.0, 0.0
        for s in seeds:
            w, rc, _ = launch("configs/gymnax_cartpole_ppo.py", root, f"alone{s}", f"seed={s}")
            failed += [] if rc == 0 else [f"seed {s} alone rc {rc}"]
            alone_wall += w
            a = read_jsonl(Path(root) / "gymnax_cartpole_ppo" / f"pack__seed={s}" / "metrics.jsonl")
            b = read_jsonl(Path(root) / "gymnax_cartpole_ppo" / f"alone{s}" / "metrics.jsonl")
            failed += [] if len(a) == len(b) > 0 else [f"seed {s}: {len(a)} lines packed, {len(b)} alone"]
            for x, y in zip(a, b):
                worst = max([worst] + [abs(float(x[k]) - float(y[k])) for k in KEYS if k in x and k in y])
        finals = [read_jsonl(Path(root) / "gymnax_cartpole_ppo" / f"pack__seed={s}" / "metrics.jsonl")[-1]
                  .get("episode_return", float("nan")) for s in seeds]
        rows.append(("8 seeds in one program", f"{packed:.1f} s; final returns {finals} (mean {np.mean(finals):.1f})"))
        rows.append(("the same 8 seeds one after another", f"{alone_wall:.1f} s (ratio {alone_wall / packed:.2f})"))
        rows.append(("largest |packed - alone| over every line's return and losses", f"{worst:.2e}"))

    print("\n| measurement | figure |\n| --- | --- |")
    for name, figure in rows:
        print(f"| {name} | {figure} |")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
