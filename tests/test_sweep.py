"""``python -m launch.sweep`` and ``--show``: trial naming, whole-sweep checks, statistics, resume, a real sweep.

    .venv/bin/python -m pytest tests/test_sweep.py -q
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from algos.ppo_config import PPOConfig
from launch.cli import run_cli
from launch.show import field_docs
from launch.slurm import jobs as slurm_jobs
from launch.slurm import submit as slurm_submit
from launch.sweep import Sweep, cli, slurm_array
from launch.sweep.local import default_jobs
from launch.sweep.spec import MAX_NAME, expand, trial_name
from launch.sweep.stats import bootstrap_ci, iqm, median
from launch.sweep.trials import DONE, NEW, PARTIAL, resolve_trials
from srljax.config import load_file, write_json

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = "configs/cartpole_ppo.py"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Config paths are relative to the checkout, as a user runs launch.sweep; no test may reach Slurm."""
    monkeypatch.chdir(ROOT)

    def refuse(args: list[str], timeout: float = 0) -> None:
        raise AssertionError(f"unexpected Slurm command {args}")

    monkeypatch.setattr(slurm_jobs, "run", refuse)


def write_sweep(path: Path, body: str) -> Path:
    path.write_text("from launch.sweep import Reference, Sweep\n\n\ndef sweep():\n" + textwrap.indent(body, "    "))
    return path


def tiny(tmp_path: Path, seeds: tuple[int, ...] = (1, 2), steps: int = 2048, **extra) -> Sweep:
    return Sweep(configs=[CARTPOLE], seeds=list(seeds), name="tiny",
                 overrides=[f"total_env_steps={steps}", "log.wandb=disabled", f"log.run_root={tmp_path / 'runs'}"],
                 **extra)


# -- expansion and names ----------------------------------------------------------------------


def test_expansion_is_configs_x_grid_x_seeds_with_deterministic_names() -> None:
    sweep = Sweep(configs=[CARTPOLE, "configs/cartpole_impala.py"], seeds=[1, 2],
                  grid={"env.id": ["CartPole-v1", "Acrobot-v1"], "algo.hidden_sizes": [(32, 32)]},
                  overrides=["total_env_steps=4096"])
    trials = expand(sweep)
    assert len(trials) == 2 * 2 * 1 * 2
    first = trials[0]
    assert first.name == "cartpole_ppo__env.id=CartPole-v1__algo.hidden_sizes=32_32__seed=1"
    # sweep overrides, then the grid point, then the seed: later ones win, as on the command line
    assert first.overrides == ("total_env_steps=4096", "env.id=CartPole-v1", "algo.hidden_sizes=32,32", "seed=1")
    assert [t.name for t in expand(sweep)] == [t.name for t in trials]  # the same sweep names the same folders
    assert len({t.name for t in trials}) == len(trials)
    assert trials[-1].name == "cartpole_impala__env.id=Acrobot-v1__algo.hidden_sizes=32_32__seed=2"
    assert trial_name("c.py", [("env.factory", "pkg/mod:make")], 3) == "c__env.factory=pkg_mod_make__seed=3"
    long = trial_name("c.py", [("env.factory", "x" * 300)], 1)
    assert len(long) <= MAX_NAME and long != trial_name("c.py", [("env.factory", "x" * 299 + "y")], 1)


# -- every problem at once, nothing created ------------------------------------------------------


def test_every_problem_of_the_sweep_is_listed_before_any_trial_starts(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    path = write_sweep(tmp_path / "bad.py", f"""\
return Sweep(configs=["{CARTPOLE}", "configs/no_such_config.py"],
             grid={{"env.id": ["CartPole-v1", "CartPol-v1"], "trainer.lrr": [1e-3]}},
             seeds=[1, 2], overrides=["env.num_envs=many", "log.run_root={runs}"])
""")
    assert cli.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "config file 'configs/no_such_config.py' not found" in err
    assert "unknown config key 'trainer.lrr'; did you mean trainer.lr? (all 4 trials)" in err
    assert "env.num_envs='many': expected an integer (all 4 trials)" in err
    assert "env.id='CartPol-v1' is not an envpool env id: did you mean CartPole-v1" in err
    assert "no trial was started" in err
    assert not runs.exists() and not Path("runs/bad").exists()  # nothing created, not even the sweep folder

    # invalid values that only the whole tree shows (arithmetic), and the shape of the Sweep itself
    path = write_sweep(tmp_path / "bad2.py", f"""\
return Sweep(configs=["{CARTPOLE}"], grid={{"trainer.num_minibatches": [3, 8]}}, seeds=[1],
             overrides=["log.run_root={runs}"])
""")
    assert cli.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "is not divisible by trainer.num_minibatches=3" in err and "trainer.num_minibatches=3__seed=1" in err
    path = write_sweep(tmp_path / "bad3.py", 'return Sweep(configs=[], seeds=[], grid={"seed": [1]})\n')
    assert cli.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "Sweep.configs must be a non-empty list" in err and "Sweep.seeds=[] must be" in err
    assert "list the seeds in Sweep.seeds" in err
    assert cli.main([str(tmp_path / "missing.py")]) == 2
    assert "sweep file" in capsys.readouterr().err
    assert not runs.exists()


# -- statistics ---------------------------------------------------------------------------------


def test_median_and_iqm_on_known_arrays() -> None:
    assert median(np.array([3.0, 1.0, 2.0])) == 2.0
    assert iqm(np.array([4.0, 1.0, 3.0, 2.0])) == 2.5  # middle two of four
    assert iqm(np.array([100.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])) == 3.5  # drops 2 at each end: [2, 3, 4, 5]
    assert iqm(np.array([1.0, 2.0, 9.0])) == 4.0  # below 4 runs nothing is cut: the mean
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(3).normal(size=11)
    assert np.isclose(iqm(x), scipy_stats.trim_mean(x, 0.25))  # rliable's definition
    assert np.allclose(iqm(np.stack([x, x + 1])), [iqm(x), iqm(x) + 1])  # reduces the last axis


def test_bootstrap_ci_contains_the_true_value_and_is_deterministic() -> None:
    x = np.random.default_rng(0).normal(loc=10.0, scale=2.0, size=200)
    for statistic in (median, iqm):
        low, high = bootstrap_ci(x, statistic)
        assert low < 10.0 < high and high - low < 1.5
        assert bootstrap_ci(x, statistic) == (low, high)  # fixed generator seed
    assert bootstrap_ci(np.array([5.0]), median) == (5.0, 5.0)
    low, high = bootstrap_ci(np.array([5275.5, 6583.8, 5420.4]), median)
    assert 5275.5 <= low <= high <= 6583.8


# -- resume ------------------------------------------------------------------------------------


def _fake_run(cfg, updates: int) -> None:
    """A run folder as the single-process loop leaves it after ``updates`` updates (no checkpoint)."""
    run_dir = Path(cfg.run_dir)
    write_json(cfg, run_dir / "config.json")
    lines = [{"time": 1.0 * u, "update": u, "env_steps": u * cfg.env_steps_per_update, "episode_return": 10.0 * u + cfg.seed}
             for u in range(1, updates + 1)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_resume_skips_finished_trials_and_moves_unresumable_partial_ones_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_sweep(tmp_path / "three.py", f"""\
return Sweep(configs=["{CARTPOLE}"], seeds=[1, 2, 3], name="three",
             overrides=["total_env_steps=4096", "log.wandb=disabled", "log.run_root={tmp_path / 'runs'}"])
""")
    first = resolve_trials(cli.load_sweep(path))
    assert [p.state for p in first] == [NEW, NEW, NEW]
    done, partial, _ = first
    _fake_run(done.cfg, done.cfg.num_updates)  # reached its last update
    _fake_run(partial.cfg, 1)  # killed after one update, before any checkpoint
    states = resolve_trials(cli.load_sweep(path))
    assert [p.state for p in states] == [DONE, PARTIAL, NEW]

    ran: list[tuple[str, tuple[str, ...]]] = []

    def fake_run_trials(to_run, sweep_dir, jobs, busy_loops=None):
        for p, extra in to_run:
            ran.append((p.spec.name, extra))
            _fake_run(p.cfg, p.cfg.num_updates)
        return 0

    monkeypatch.setattr(cli, "run_trials", fake_run_trials)
    assert cli.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "finished (skipped): 1; partial: 1 (0 resumed with --resume, 1 moved aside and rerun); new: 1" in out
    assert ran == [("cartpole_ppo__seed=2", ()), ("cartpole_ppo__seed=3", ())]  # the finished one is skipped
    sweep_dir = tmp_path / "runs" / "three"
    aside = sorted(p.name for p in sweep_dir.glob("cartpole_ppo__seed=2.failed-*"))
    assert len(aside) == 1 and "holds no checkpoint" in out, out
    report = (sweep_dir / "results.md").read_text()
    assert "| cartpole_ppo | CartPole-v1 | - | 3/3 |" in report

    ran.clear()
    assert cli.main([str(path)]) == 0 and ran == []  # everything finished: nothing runs, the report is rewritten
    assert "every trial is finished" in capsys.readouterr().out

    # a partial trial that launch.local can continue gets --resume instead of being moved aside
    (sweep_dir / "cartpole_ppo__seed=3" / "metrics.jsonl").write_text(json.dumps({"update": 1, "env_steps": 1024}) + "\n")
    monkeypatch.setattr(cli.run_folder, "problems", lambda cfg, resume=False: [])
    assert cli.main([str(path)]) == 0
    assert ran == [("cartpole_ppo__seed=3", ("--resume",))]
    assert (sweep_dir / "cartpole_ppo__seed=3").is_dir()

    # a finished trial whose settings differ from the sweep's is refused rather than reported under them
    saved = json.loads((sweep_dir / "cartpole_ppo__seed=1" / "config.json").read_text())
    saved["trainer"]["lr"] = 0.5
    (sweep_dir / "cartpole_ppo__seed=1" / "config.json").write_text(json.dumps(saved))
    assert cli.main([str(path)]) == 2
    assert "holds a finished run with other settings (trainer.lr: 0.5 there, 0.00025 now)" in capsys.readouterr().err


def test_default_jobs_counts_the_cores_a_trial_needs() -> None:
    single = load_file(CARTPOLE)
    distributed = load_file("configs/cartpole_ppo_distributed.py")
    assert default_jobs([single], cores=2) == 1 and default_jobs([single], cores=16) == 8
    assert default_jobs([single, distributed], cores=16) < 8  # the hungriest trial sets the pace
    assert default_jobs([distributed], cores=1) == 1


# -- Slurm job array ----------------------------------------------------------------------------


def test_slurm_array_script_runs_the_trial_of_its_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_python = tmp_path / "python"
    fake_python.write_text('#!/bin/bash\necho "$@" > "$FAKE_ARGS"\necho trained\n')
    fake_python.chmod(0o755)
    sweep = tiny(tmp_path, seeds=(1, 2), grid={"trainer.lr": [1e-3]})
    sweep = dataclasses.replace(sweep, overrides=[*sweep.overrides, f"slurm.python={fake_python}",
                                                  "slurm.partition=cpu", "slurm.time_limit=2:00:00"])
    planned = slurm_array.resolve_for_slurm(resolve_trials(sweep))
    assert slurm_array.array_problems(planned) == []
    sweep_dir = planned[0].run_dir.parent
    script = slurm_array.render(planned, sweep_dir, jobs=1)
    for line in ["#SBATCH --job-name=sweep/tiny", "#SBATCH --array=0-1%1", "#SBATCH --partition=cpu",
                 "#SBATCH --time=2:00:00", "#SBATCH --cpus-per-task=2", f"cd {ROOT} || exit 1"]:
        assert line in script.splitlines(), line
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0

    # submit (sbatch faked), then run task 1 as Slurm would: it runs trial 1 and records its exit and time
    monkeypatch.setattr(slurm_array, "sbatch", lambda path: "4242")
    assert slurm_array.submit(planned, sweep_dir, jobs=None) == "4242"
    assert json.loads((sweep_dir / "slurm" / "array.json").read_text())["trials"] == [p.spec.name for p in planned]
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "4242", "FAKE_ARGS": str(tmp_path / "args")}
    done = subprocess.run(["bash", str(sweep_dir / "slurm" / "array.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    name = "cartpole_ppo__trainer.lr=0.001__seed=2"
    args = (tmp_path / "args").read_text().split()
    assert args[:6] == ["-m", "launch.local", CARTPOLE, "-e", "tiny", "-f"] and args[6] == name
    assert "seed=2" in args and f"log.run_root={tmp_path / 'runs'}" in args
    assert (sweep_dir / "logs" / f"{name}.log").read_text() == "trained\n"
    assert json.loads((sweep_dir / "logs" / f"{name}.json").read_text())["exit_code"] == 0


# -- --show -------------------------------------------------------------------------------------


def _never(cfg, resume=False) -> int:
    raise AssertionError("--show must not launch")


def test_show_prints_every_key_with_its_meaning_and_the_sizes_and_creates_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    code = run_cli(_never, [CARTPOLE, "--show", "-f", "t1", f"log.run_root={runs}", "trainer.lr=1e-4"], "launch", "")
    out = capsys.readouterr().out
    assert code == 0
    assert "  env.num_envs = 8  (int)\n      environments owned by one actor (one envpool instance)." in out
    assert "  trainer.lr = 0.0001  (float; default 0.00025)" in out  # after overrides, the default noted
    assert "  layout.mode = single  (one of single|distributed)" in out
    assert "  algo.clip_coef = 0.2  (float; default 0.1)" in out and "  algo.gamma = 0.99  (float)\n  algo" in out
    assert "batch 8 env columns x 128 steps = 1,024 samples per update" in out and "488 updates" in out
    assert "minibatch 128 samples (1,024 / trainer.num_minibatches=8)" in out
    assert "slurm.trainer" not in out  # launch.slurm --show lists that section
    assert not runs.exists()

    # a user's algo config class, and a distributed layout's workers
    assert run_cli(_never, ["examples/cartpole_reinforce.py", "--show"], "launch", "") == 0
    out = capsys.readouterr().out
    assert "algo: ReinforceConfig" in out and "segment length T; returns bootstrap" in out
    assert run_cli(_never, ["configs/cartpole_ppo_distributed.py", "--show"], "launch", "") == 0
    assert "workers: trainer x1" in capsys.readouterr().out

    # launch.slurm: the slurm section with its meanings and the het-job components
    assert slurm_submit.main(["configs/cartpole_ppo_distributed.py", "--show", f"log.run_root={runs}"]) == 0
    out = capsys.readouterr().out
    assert "  slurm.trainer.cpus_per_task = 0  (int)\n      0: the layout's estimate" in out
    assert "component 0: trainer x1 + policy x1" in out
    assert not runs.exists()

    # a config with problems is shown, then its problems, exit 2
    assert run_cli(_never, [CARTPOLE, "--show", "trainer.num_minibatches=3"], "launch", "") == 2
    captured = capsys.readouterr()
    assert "trainer.num_minibatches = 3" in captured.out and "not divisible by trainer.num_minibatches=3" in captured.err
    assert run_cli(_never, [CARTPOLE, "--show", "trainer.lrr=1"], "launch", "") == 2
    assert "unknown config key 'trainer.lrr'" in capsys.readouterr().err


def test_field_docs_come_from_the_class_source() -> None:
    docs = field_docs(PPOConfig)
    assert docs["num_steps"] == "rollout length T per environment per update."
    assert "gamma" not in docs  # no docstring under it: none shown
    assert field_docs(type("Local", (), {})) == {}


# -- a real sweep ---------------------------------------------------------------------------------


def test_a_real_tiny_sweep_writes_results_and_curves_and_resumes_as_finished(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    path = write_sweep(tmp_path / "real.py", f"""\
return Sweep(configs=["{CARTPOLE}"], seeds=[1, 2],
             overrides=["total_env_steps=1024", "log.wandb=disabled", "checkpoint.final=false", "log.run_root={runs}"],
             reference=Reference("Ref", "made up for the test", {{"CartPole-v1": 20.0}}))
""")
    # the sweep runs here; each trial is a real `python -m launch.local` process, both at once
    assert cli.main([str(path), "--jobs", "2"]) == 0, capsys.readouterr()
    sweep_dir = runs / "real"
    report = (sweep_dir / "results.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| cartpole_ppo |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["cartpole_ppo", "CartPole-v1", "-", "2/2"], row
    assert cells[10] == "20.0" and cells[11].endswith(("at or above", "**below**")), row  # after wall, env steps/s, steady
    assert (sweep_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for seed in (1, 2):
        record = json.loads((sweep_dir / "logs" / f"cartpole_ppo__seed={seed}.json").read_text())
        assert record["exit_code"] == 0 and record["wall_s"] > 0
    capsys.readouterr()

    assert cli.main([str(path)]) == 0
    assert "every trial is finished: nothing to run" in capsys.readouterr().out
    (sweep_dir / "results.md").unlink()
    assert cli.main([str(path), "--report"]) == 0
    assert (sweep_dir / "results.md").read_text().count("| cartpole_ppo |") == 1


def test_the_report_gives_steady_speed_and_says_why_a_trial_ends_short_of_its_budget(tmp_path: Path) -> None:
    from launch.sweep import report
    from launch.sweep.local import Running, live_table
    from launch.sweep.spec import TrialSpec
    from launch.sweep.trials import Planned

    # compilation makes the first lines slow; the steady rate leaves them out
    records = [{"time": 10.0, "env_steps": 1024}] + [{"time": 10.0 + i, "env_steps": 1024 * (1 + 2 * i)}
                                                      for i in range(1, 10)]
    assert report.steady_rate(records) == pytest.approx(2048.0)
    assert report.steady_rate(records[:2]) is None
    cfg = dataclasses.replace(load_file(CARTPOLE), total_env_steps=50_000, trial="s1",
                              log=dataclasses.replace(load_file(CARTPOLE).log, run_root=str(tmp_path)))
    planned = Planned(TrialSpec("cartpole_ppo__seed=1", CARTPOLE, (), 1, ()), cfg)
    result = report.TrialResult(planned, DONE, final=200.0, env_steps=49_152)
    assert report.short_of_budget([result, result]) == [
        "- `cartpole_ppo` trials end at about 49,152 env steps, short of total_env_steps=50,000: a trial trains whole "
        "updates of 1,024 env steps (48 of them); a multiple of 1,024 reaches the budget exactly."]
    assert report.short_of_budget([dataclasses.replace(result, env_steps=50_176)]) == []
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(json.dumps({"env_steps": 20480, "episode_return": 87.5, "sps": 4100.0}) + "\n")
    proc = subprocess.Popen(["true"])
    proc.wait()
    table = live_table([Running(planned, proc, open(os.devnull, "wb"), 0.0)], done=1, pending=2)
    assert table.splitlines()[0] == "sweep: 1 ended, 1 running, 2 waiting"
    assert "20,480 / 50,000 env steps  return     87.5  4,100 steps/s" in table.splitlines()[1], table


def test_a_reference_at_another_budget_says_so_in_the_table() -> None:
    from launch.sweep import Reference, report
    from launch.sweep.spec import TrialSpec
    from launch.sweep.trials import Planned

    cfg = dataclasses.replace(load_file(CARTPOLE), total_env_steps=50_000)
    planned = Planned(TrialSpec("cartpole_ppo__seed=1", CARTPOLE, (), 1, ()), cfg)
    rows = [report.TrialResult(planned, DONE, final=250.0, env_steps=49_152)]
    at = Reference("CleanRL", "made up", {"CartPole-v1": 490.0}, env_steps=500_000)
    assert report._row(rows, at)[-1] == "0.51x, **below** (reference at 500,000 env steps, these at 50,000)"
    same = Reference("CleanRL", "made up", {"CartPole-v1": 490.0}, env_steps=50_000)
    assert report._row(rows, same)[-1] == "0.51x, **below**"
