"""JaxMARL's own MAPPO and QMIX baselines on SMAX, run on this machine at a budget of env steps.

    git clone https://github.com/FLAIROx/JaxMARL ~/JaxMARL     # the baselines are not in the jaxmarl package
    python bench/jaxmarl_baselines.py --jaxmarl ~/JaxMARL --algos mappo qmix --map 3m --steps 2000000 --seeds 0 1 2 \\
        [--set qmix.HIDDEN_SIZE=64 ...] [--ours RUN_DIR ...]

Each algorithm's script (``baselines/MAPPO/mappo_rnn_smax.py``, ``baselines/QLearning/qmix_rnn.py``) is imported
from the checkout and its ``make_train`` called with the config its hydra entry point would build: the script's yaml
(``mappo_homogenous_rnn_smax.yaml``; ``config.yaml`` merged with ``alg/ql_rnn_smax.yaml``) with ``MAP_NAME`` and
``TOTAL_TIMESTEPS`` set here, and ``--set ALGO.KEY=VALUE`` on top (printed). What the venv lacks is stood in for
before the import: ``hydra`` and ``omegaconf`` (only the entry points use them), ``wandb.log`` (the scripts' only
output: the lines are collected here), and ``flashbax``'s trajectory buffer (QMIX's replay), by ``_TrajectoryBuffer``
below: the same shapes, a ring of ``max_length_time_axis`` adds per env row, sampling a uniform env row and a uniform
written slot, sampling allowed once ``min_length_time_axis`` adds are in or the ring is full (flashbax's rule for
``sample_sequence_length=1, period=1``, the only form ``qmix_rnn.py`` uses). Seeds run one after another, each
jit-compiled alone (``PRNGKey(seed)``, as the script's ``SEED``).

Reported per seed: MAPPO's ``win_rate`` and ``returns`` per update (the episodes that ended in its 128 steps x
``NUM_ENVS`` envs, the stochastic policy: what the script logs), the last update's and the mean of the last 5;
QMIX's greedy test (``test_returned_won_episode`` / ``test_returned_episode_returns``: ``TEST_NUM_ENVS`` envs for
``TEST_NUM_STEPS`` steps every 5% of training, what the script logs as its test metrics), the last and the best, and
the training ``returned_won_episode`` (the epsilon-greedy rollouts' mean over steps of the last finished episode's
outcome, as the script logs it). ``--ours`` adds srljax run folders (``metrics.jsonl``'s last line and best 3-line
mean of ``win_rate`` / ``episode_return``) to the table.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

SCRIPTS = {"mappo": ("baselines/MAPPO/mappo_rnn_smax.py", ["baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml"]),
           "qmix": ("baselines/QLearning/qmix_rnn.py", ["baselines/QLearning/config/config.yaml",
                                                        "baselines/QLearning/config/alg/ql_rnn_smax.yaml"])}
LINES: list[dict[str, Any]] = []  # what the scripts' wandb.log calls get
PROGRESS = {"every": 0, "tag": ""}  # print every n-th line as it arrives (--progress): a cut-short run still tells


class _TrajectoryState(NamedTuple):
    experience: Any  # leaves [add_batch, max_time, ...]
    current_index: Any  # [] int32
    is_full: Any  # [] bool


class _TrajectoryBuffer:
    """The part of ``flashbax.make_trajectory_buffer`` that ``qmix_rnn.py`` calls (the module docstring)."""

    def __init__(self, max_length_time_axis: int, min_length_time_axis: int, sample_batch_size: int,
                 add_batch_size: int, sample_sequence_length: int = 1, period: int = 1):
        if sample_sequence_length != 1 or period != 1:
            raise ValueError("this stand-in for flashbax takes sample_sequence_length=1, period=1 only")
        self.max_len, self.min_len = int(max_length_time_axis), int(min_length_time_axis)
        self.batch, self.rows = int(sample_batch_size), int(add_batch_size)

    def init(self, item: Any) -> _TrajectoryState:
        import jax
        import jax.numpy as jnp

        exp = jax.tree.map(lambda x: jnp.zeros((self.rows, self.max_len, *jnp.shape(x)), jnp.asarray(x).dtype), item)
        return _TrajectoryState(exp, jnp.int32(0), jnp.bool_(False))

    def add(self, state: _TrajectoryState, batch: Any) -> _TrajectoryState:
        import jax
        import jax.numpy as jnp

        t = jax.tree.leaves(batch)[0].shape[1]
        idx = (state.current_index + jnp.arange(t)) % self.max_len
        exp = jax.tree.map(lambda buf, x: buf.at[:, idx].set(x.astype(buf.dtype)), state.experience, batch)
        end = state.current_index + t
        return _TrajectoryState(exp, end % self.max_len, state.is_full | (end >= self.max_len))

    def can_sample(self, state: _TrajectoryState) -> Any:
        return state.is_full | (state.current_index >= self.min_len)

    def sample(self, state: _TrajectoryState, rng: Any) -> Any:
        import jax
        import jax.numpy as jnp

        k_row, k_time = jax.random.split(rng)
        row = jax.random.randint(k_row, (self.batch,), 0, self.rows)
        high = jnp.where(state.is_full, self.max_len, jnp.maximum(state.current_index, 1))
        t = jax.random.randint(k_time, (self.batch,), 0, high)
        return types.SimpleNamespace(experience=jax.tree.map(lambda buf: buf[row, t][:, None], state.experience))


def _stand_ins() -> None:
    """Modules the scripts import that this venv lacks or that would reach the network (the module docstring)."""
    hydra = types.ModuleType("hydra")
    hydra.main = lambda *a, **k: (lambda fn: fn)
    omegaconf = types.ModuleType("omegaconf")
    omegaconf.OmegaConf = types.SimpleNamespace(to_container=lambda c: c, to_yaml=lambda c: json.dumps(c, default=str),
                                                save=lambda *a, **k: None)
    flashbax = types.ModuleType("flashbax")
    flashbax.make_trajectory_buffer = lambda **kw: _TrajectoryBuffer(**kw)
    wandb = types.ModuleType("wandb")
    wandb.log = _log
    wandb.init = lambda *a, **k: None
    for name, mod in (("hydra", hydra), ("omegaconf", omegaconf), ("flashbax", flashbax), ("wandb", wandb)):
        sys.modules[name] = mod


def _log(d: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    LINES.append(_plain(d))
    if PROGRESS["every"] and len(LINES) % PROGRESS["every"] == 0:
        keep = ("env_step", "win_rate", "returns", "test_returned_won_episode", "test_returned_episode_returns",
                "returned_won_episode", "loss")
        line = {k: round(v, 4) for k, v in LINES[-1].items() if k in keep}
        print(f"{PROGRESS['tag']} line {len(LINES)} {json.dumps(line)} t={time.time() - PROGRESS['start']:.0f}s",
              flush=True)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update({f"{k}/{kk}": vv for kk, vv in _plain(v).items()})
        else:
            a = np.asarray(v)
            out[k] = float(a.mean()) if a.size else float("nan")
    return out


def _load(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"jaxmarl_baseline_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _parse_value(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def config_for(jaxmarl: Path, algo: str, map_name: str, steps: int, sets: list[str]) -> dict[str, Any]:
    import yaml

    cfg: dict[str, Any] = {}
    for rel in SCRIPTS[algo][1]:
        cfg.update(yaml.safe_load((jaxmarl / rel).read_text()))
    cfg.pop("defaults", None)
    cfg.pop("alg", None)
    cfg["MAP_NAME"], cfg["TOTAL_TIMESTEPS"] = map_name, int(steps)
    cfg["WANDB_MODE"] = "online" if algo == "qmix" else "disabled"  # qmix_rnn.py logs only when not "disabled"
    for item in sets:
        key, _, value = item.partition("=")
        owner, _, key = key.partition(".")
        if owner == algo:
            cfg[key] = _parse_value(value)
    return cfg


def run_one(jaxmarl: Path, algo: str, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import jax

    mod = _load(jaxmarl / SCRIPTS[algo][0])
    LINES.clear()
    start = time.time()
    PROGRESS.update(tag=f"{algo} seed {seed}", start=start)
    if algo == "mappo":
        train = jax.jit(mod.make_train(copy.deepcopy(cfg)))
    else:
        c = copy.deepcopy(cfg)
        env, _ = mod.env_from_config(copy.deepcopy(c))
        train = jax.jit(mod.make_train(c, env))
    jax.block_until_ready(train(jax.random.PRNGKey(seed)))
    wall = time.time() - start
    lines = list(LINES)
    if algo == "mappo":
        win = [ln["win_rate"] for ln in lines]
        ret = [ln["returns"] for ln in lines]
        steps = [ln["env_step"] + cfg["NUM_ENVS"] * cfg["NUM_STEPS"] for ln in lines]
        summary = {"last_win": win[-1], "last5_win": statistics.fmean(win[-5:]), "last_return": ret[-1],
                   "last5_return": statistics.fmean(ret[-5:]), "best_win": max(win)}
        curve = [(s, w) for s, w in zip(steps, win)]
    else:
        tested = [ln for ln in lines if "test_returned_won_episode" in ln]
        marks, seen = [], set()
        for ln in tested:  # the test metrics repeat between tests: keep each test once
            key = (ln["test_returned_won_episode"], ln["test_returned_episode_returns"])
            if not marks or key != seen:
                marks.append(ln)
            seen = key
        win = [ln["test_returned_won_episode"] for ln in marks]
        summary = {"last_test_win": win[-1], "best_test_win": max(win),
                   "last_test_return": marks[-1]["test_returned_episode_returns"],
                   "last_train_won": lines[-1]["returned_won_episode"],
                   "last5_train_won": statistics.fmean(ln["returned_won_episode"] for ln in lines[-5:])}
        curve = [(ln["env_step"], ln["test_returned_won_episode"]) for ln in marks]
    return {"algo": algo, "seed": seed, "wall_s": round(wall, 1), "updates": len(lines), **summary,
            "curve": [(int(s), round(float(w), 3)) for s, w in curve]}


def ours(run: Path) -> dict[str, Any]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "win_rate" in r]
    means = [statistics.fmean(r["episode_return"] for r in rows[i:i + 3]) for i in range(max(len(rows) - 2, 0))]
    wins = [statistics.fmean(r["win_rate"] for r in rows[i:i + 3]) for i in range(max(len(rows) - 2, 0))]
    cfg = json.loads((run / "config.json").read_text())
    return {"run": str(run), "algo": cfg["algo"]["name"], "seed": cfg.get("seed"), "env_steps": rows[-1]["env_steps"],
            "last_win": rows[-1]["win_rate"], "last_return": rows[-1]["episode_return"],
            "best3_win": max(wins) if wins else None, "best3_return": max(means) if means else None}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jaxmarl", type=Path, required=True, help="a JaxMARL checkout (its baselines/ folder)")
    p.add_argument("--algos", nargs="+", default=["mappo", "qmix"], choices=sorted(SCRIPTS))
    p.add_argument("--map", default="3m")
    p.add_argument("--steps", type=int, default=2_000_000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--set", action="append", default=[], help="ALGO.KEY=VALUE on the script's config (yaml value)")
    p.add_argument("--ours", type=Path, nargs="*", default=[], help="srljax run folders to add to the table")
    p.add_argument("--json", type=Path, help="write the results here too")
    p.add_argument("--progress", type=int, default=0, help="print every n-th logged line as it arrives (0: none)")
    args = p.parse_args(argv)
    for algo in args.algos:
        if not (args.jaxmarl / SCRIPTS[algo][0]).exists():
            raise SystemExit(f"{args.jaxmarl / SCRIPTS[algo][0]} not found: --jaxmarl is a JaxMARL checkout "
                             "(git clone https://github.com/FLAIROx/JaxMARL)")
    _stand_ins()
    PROGRESS["every"] = args.progress
    print("machine:", describe(), flush=True)
    results = []
    for algo in args.algos:
        cfg = config_for(args.jaxmarl, algo, args.map, args.steps, args.set)
        print(f"{algo} config: {json.dumps(cfg, default=str)}", flush=True)
        for seed in args.seeds:
            r = run_one(args.jaxmarl, algo, cfg, seed)
            results.append(r)
            print(json.dumps(r), flush=True)
    for run in args.ours:
        r = ours(run)
        results.append(r)
        print(json.dumps(r), flush=True)
    print("machine (end):", describe(), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
