"""The learning gate: every shipped config's PROMISE, read, shown, run over seeds and judged (``launch/sweep/gate.py``).

    .venv/bin/python -m pytest tests/test_gate.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from launch.show import promise_line
from launch.sweep import Sweep
from launch.sweep.gate import Verdict, compare, config_files, measure, promise_of, promised_configs, summary
from launch.sweep.spec import expand, shape_problems
from srljax.config import ConfigError, Promise, apply_overrides, load_file, load_promise

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


# -- the table of promises ----------------------------------------------------------------------

def test_every_config_and_example_that_trains_declares_a_valid_promise():
    files = config_files()
    assert len(files) >= 40 and Path("examples/cartpole_reinforce.py") in files
    missing = [str(f) for f in files if load_promise(f) is None]
    assert not missing, f"config files without a PROMISE: {missing}"
    assert sorted(promised_configs()) == sorted(map(str, files))


def test_every_budget_is_env_steps_and_a_time_limit_only_guards_it():
    """A promise is about the env steps a config trains: its timeout must leave room for 1.5x the wall time the
    promise measured, so a slower CPU trains the same budget instead of stopping early and 'finishing'."""
    short = []
    for path in config_files():
        promise = load_promise(path)
        cfg = apply_overrides(load_file(path), list(promise.overrides))
        if cfg.timeout_seconds < 1.5 * promise.wall_s:
            short.append(f"{path}: timeout_seconds={cfg.timeout_seconds} < 1.5 x wall_s={promise.wall_s}")
    assert not short, short


def test_the_quick_gate_holds_the_cheap_promises_and_fits_ci():
    quick = [c for c in promised_configs() if promise_of(c).quick]
    names = {Path(c).stem for c in quick}
    assert {"cartpole_ppo", "cartpole_dqn", "lbf_mappo", "cartpole_r2d2", "cartpole_reinforce"} <= names
    cost = sum(promise_of(c).wall_s * len(promise_of(c).seeds) for c in quick)
    assert cost < 45 * 60, f"the quick gate would take ~{cost / 60:.0f} min of CI on 2 cores"
    # hours each: Atari, the MuJoCo table per task, SAC / TD3 (HalfCheetah's fast PPO, ~50 s a seed, is quick)
    assert not any(promise_of(c).quick for c in promised_configs()
                   if "atari" in c or "mujoco_tasks" in c or "mujoco_sac" in c or "mujoco_td3" in c)


def test_a_bad_promise_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from configs.cartpole_ppo import experiment\n\nPROMISE = {'metric': 'return'}\n")
    with pytest.raises(ConfigError, match="PROMISE is a dict, expected srljax.config.Promise"):
        load_promise(bad)
    assert Promise("returns", median=1, worst=2, wall_s=0).problems("x") == [
        "x: Promise.metric='returns' must be one of return, best_return, eval_best, eval_final, pbt_worst_member, "
        "neg_exploitability or win_rate:BOT",
        "x: Promise.worst=2 is above Promise.median=1",
        "x: Promise.wall_s=0 must be the measured seconds per seed (> 0)"]


def test_show_prints_the_promise_at_the_configs_budget():
    line = promise_line("configs/lbf_mappo.py")
    promise = load_promise("configs/lbf_mappo.py")
    assert f"median >= {promise.median:g}" in line and f"{load_file('configs/lbf_mappo.py').total_env_steps:,}" in line
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "--show"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "promise (python -m launch.sweep configs/sweeps/gate.py checks it)" in out.stdout


# -- expansion and judging ----------------------------------------------------------------------

def test_a_gate_sweep_runs_each_config_at_its_promises_seeds_and_overrides():
    sweep = Sweep(configs=["configs/lbf_mappo.py", "configs/cartpole_ppo.py"], gate=True, overrides=["log.window=5"])
    specs = expand(sweep)
    lbf = [s for s in specs if s.config == "configs/lbf_mappo.py"]
    assert [s.seed for s in lbf] == list(promise_of("configs/lbf_mappo.py").seeds)
    assert all(s.overrides[0] == "log.window=5" and s.overrides[-1] == f"seed={s.seed}" for s in specs)
    assert shape_problems(Sweep(configs=["c.py"], gate=True, grid={"trainer.lr": [1e-3]}))
    with pytest.raises(ConfigError, match="declares no PROMISE"):
        expand(Sweep(configs=["tests/parity_env.py"], gate=True))


def write_run(folder: Path, returns: list[float], evals: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"env_steps": i, "episode_return": r}) + "\n"
                                                  for i, r in enumerate(returns)))
    if evals is not None:
        (folder / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    return folder


def test_each_metric_is_read_from_the_run_folder(tmp_path):
    run = write_run(tmp_path / "a", [10, 300, 320, 340, 100, 90],
                    [{"mean": 200}, {"mean": 480}, {"mean": 450},
                     {"opponent": "random", "win_rate": 0.9}, {"opponent": "mcts100", "win_rate": 0.4},
                     {"opponent": "mcts100", "win_rate": 0.55}])
    assert measure("return", run) == 90
    assert measure("best_return", run) == pytest.approx(320)
    assert measure("eval_best", run) == 480 and measure("eval_final", run) == 450
    assert measure("win_rate:mcts100", run) == 0.55 and measure("win_rate:random", run) == 0.9
    assert measure("return", write_run(tmp_path / "none", [])) is None
    (run / "psro").mkdir()
    (run / "psro" / "psro.jsonl").write_text("".join(json.dumps({"iteration": i, "exploitability": e}) + "\n"
                                                     for i, e in enumerate([0.46, 0.2, 0.04])))
    assert measure("neg_exploitability", run) == -0.04  # lower exploitability is better: the gate's >= holds
    assert measure("neg_exploitability", tmp_path / "none") is None


def test_a_promise_breaks_on_its_median_or_its_worst_seed_and_names_its_figures(tmp_path):
    promise = Promise("return", median=0.9, worst=0.8, seeds=(1, 2, 3, 4, 5), wall_s=90)
    good = Verdict("configs/lbf_mappo.py", promise, 2_000_000, {1: 1.0, 2: 1.0, 3: 0.85, 4: 1.0, 5: 0.9})
    low_worst = Verdict("configs/lbf_mappo.py", promise, 2_000_000, {1: 0.5, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0})
    low_median = Verdict("configs/lbf_mappo.py", promise, 2_000_000, {1: 0.85, 2: 0.85, 3: 0.85, 4: 1.0, 5: 1.0})
    failed = Verdict("configs/lbf_mappo.py", promise, 2_000_000, {1: None, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0},
                     failed={1: "exit 1"})
    assert good.kept and not low_worst.kept and not low_median.kept and not failed.kept
    assert low_worst.why() == "worst seed 0.5 < 0.8" and low_median.why() == "median 0.85 < 0.9"
    assert failed.why().startswith("seed 1: exit 1")
    last = summary([good, low_worst], tmp_path / "gate.md").splitlines()[-1]
    assert last.startswith("gate: 1 of 2 promises BROKEN") and "configs/lbf_mappo.py [worst seed 0.5 < 0.8; seed 1: " \
        "0.5, seed 2: 1, seed 3: 1" in last
    assert summary([good], tmp_path / "gate.md").splitlines()[-1].startswith("gate: all 1 promises kept")


def test_compare_says_what_moved(tmp_path):
    promise = Promise("return", median=400, worst=300, wall_s=40)
    old = {"tree": "a", "promises": [Verdict("c.py", promise, 1, {1: 500.0, 2: 480.0}).to_json()]}
    (tmp_path / "gate.json").write_text(json.dumps(old))
    new = {"tree": "b", "promises": [Verdict("c.py", promise, 1, {1: 500.0, 2: 120.0}).to_json(),
                                     Verdict("d.py", promise, 1, {1: 450.0}).to_json()]}
    text = compare(tmp_path, new)
    assert "kept -> BROKEN c.py: median 490.0 -> 310.0 (-180), worst 480.0 -> 120.0 (-360)" in text
    assert "new      d.py" in text
    with pytest.raises(ConfigError, match="not a gate.json"):
        compare(tmp_path / "nothing.json", new)


# -- a real gate: a deliberately broken default breaks its promise ------------------------------

def test_a_broken_default_makes_the_gate_exit_1_naming_that_config(tmp_path):
    """Two promises on CartPole PPO at 40k env steps (~70-200 there; random play ~22): one as shipped, one with
    ``trainer.lr=1e-9`` (it learns nothing). The gate runs both, keeps the first, breaks the second by name and
    exits 1; a dry run moves nothing, and ``--report --compare`` judges the runs again beside that gate.json."""
    body = textwrap.dedent("""
        import dataclasses
        from configs.cartpole_ppo import experiment as base
        from srljax.config import Promise

        PROMISE = Promise("return", median=50, worst=40, seeds=(1,), wall_s=20)


        def experiment():
            cfg = base()
            return dataclasses.replace(cfg, total_env_steps=40960, trainer=dataclasses.replace(cfg.trainer, lr=LR))
        """)
    (tmp_path / "ok_ppo.py").write_text("LR = 2.5e-4\n" + body)
    (tmp_path / "zero_lr_ppo.py").write_text("LR = 1e-9\n" + body)  # lr=0 itself is refused before launch
    (tmp_path / "gate.py").write_text(textwrap.dedent(f"""
        from launch.sweep import Sweep

        def sweep():
            return Sweep(name="g", configs=["{tmp_path}/ok_ppo.py", "{tmp_path}/zero_lr_ppo.py"], gate=True,
                         overrides=["log.run_root={tmp_path}/runs", "checkpoint.final=false"])
        """))
    out = subprocess.run([sys.executable, "-m", "launch.sweep", str(tmp_path / "gate.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    last = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert last.startswith("gate: 1 of 2 promises BROKEN") and "zero_lr_ppo.py [median" in last
    assert "ok_ppo.py [" not in last
    table = (tmp_path / "runs" / "g" / "gate.md").read_text()
    assert "zero_lr_ppo.py | return | 40,960 | 1 |" in table
    again = subprocess.run([sys.executable, "-m", "launch.sweep", str(tmp_path / "gate.py"), "--dry-run"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "finished (skipped): 2" in again.stdout  # a dry run moves nothing
    report = subprocess.run([sys.executable, "-m", "launch.sweep", str(tmp_path / "gate.py"), "--report", "--compare",
                             str(tmp_path / "runs" / "g")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert report.returncode == 1 and "BROKEN   " in report.stdout and "zero_lr_ppo.py: median" in report.stdout
