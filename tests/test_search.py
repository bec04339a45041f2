"""Search in ``launch.sweep`` (issue 44): a sweep that names a search space runs an Optuna study in its folder,
prunes trials from their metrics lines, continues after a kill, and reports the best trial and importances."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from launch.sweep import Choice, IntRange, LogUniform, Search, Sweep, Uniform
from launch.sweep import search as search_mod
from launch.sweep.spec import shape_problems
from srljax.config import ConfigError

optuna = pytest.importorskip("optuna", reason="the test extra installs optuna: pip install -e '.[test]'")
ROOT = Path(__file__).resolve().parents[1]


def a_sweep(tmp_path: Path, **search) -> Sweep:
    space = search.pop("space", {"trainer.lr": LogUniform(1e-4, 3e-3), "algo.clip_coef": Choice([0.1, 0.3])})
    return Sweep(name="s", configs=["configs/cartpole_ppo.py"], seeds=[1],
                 overrides=[f"log.run_root={tmp_path}", "total_env_steps=4096", "algo.num_steps=32",
                            "log.wandb=disabled", "log.prometheus_port=-1", "log.progress=lines"],
                 search=Search(space=space, **search))


def test_a_bad_search_is_one_error_naming_each_problem(tmp_path):
    bad = Sweep(configs=["configs/cartpole_ppo.py"], seeds=[1, 2], grid={"trainer.lr": [1e-3]},
                search=Search(space={"trainer.lr": LogUniform(0, 1e-3), "algo.clip_coef": Choice([]),
                                     "x": IntRange(4, 2), "seed": Uniform(0, 1)}, sampler="grid", trials=0))
    found = "\n".join(shape_problems(bad))
    for text in ("replaces Sweep.grid", "one config at one seed", "a log scale needs low > 0",
                 "Choice takes a non-empty list", "low must be below high", "the seed is not tuned",
                 "Search.sampler='grid'", "Search.trials=0"):
        assert text in found, (text, found)
    # keys and values are checked with the config at each end of each range, before anything starts
    sweep = a_sweep(tmp_path, space={"trainer.lrr": LogUniform(1e-4, 1e-3), "algo.clip_coef": Uniform(0.1, 0.3),
                                     "trainer.update_epochs": IntRange(0, 4)})
    with pytest.raises(ConfigError) as err:
        search_mod.check(sweep)
    text = str(err.value)
    assert "trainer.lrr" in text and "trainer.update_epochs" in text and "at 0" in text, text
    assert not (tmp_path / "s").exists()  # nothing created


def test_without_optuna_the_message_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[search\]'"):
        search_mod.need_optuna()


def _live(run_dir: Path, trial) -> search_mod.Live:
    return search_mod.Live(SimpleNamespace(planned=SimpleNamespace(run_dir=run_dir)), trial)


def test_the_pruner_is_fed_from_metrics_lines_as_they_are_written(tmp_path):
    sweep = a_sweep(tmp_path, pruner="median", startup_trials=2, warmup_env_steps=1000)
    study = search_mod.open_study(sweep, tmp_path / "s")
    for number, returns in enumerate(([20, 100, 300], [30, 150, 400])):  # two finished trials
        trial = study.ask()
        for step, value in zip((512, 1024, 2048), returns):
            trial.report(value, step)
        study.tell(trial, returns[-1])
    run_dir = tmp_path / "s" / "trial-0002"
    run_dir.mkdir()
    live = _live(run_dir, study.ask())
    metrics = run_dir / "metrics.jsonl"
    with metrics.open("w") as f:
        f.write(json.dumps({"env_steps": 512, "episode_return": 10.0}) + "\n")
        f.write('{"env_steps": 1024, "episode_re')  # a line being written: not read yet
    assert not search_mod.observe(live, sweep.search)  # before warmup_env_steps: never pruned
    assert live.reported == {512}
    with metrics.open("a") as f:
        f.write('turn": 20.0}\n')
    assert search_mod.observe(live, sweep.search)  # 20 < the median of 100 and 150 at step 1024
    assert live.pruned_at == 1024 and live.pruned_value == 20.0
    assert live.trial.storage.get_trial(live.trial._trial_id).intermediate_values == {512: 10.0, 1024: 20.0}


def test_the_report_names_the_best_trial_and_each_parameters_importance(tmp_path):
    sweep = a_sweep(tmp_path, sampler="random", pruner="none")
    study = search_mod.open_study(sweep, tmp_path / "s")
    for _ in range(8):
        trial = study.ask()
        params = search_mod.suggest(trial, dict(sweep.search.space))
        trial.set_user_attr("trial", search_mod.trial_name(trial.number))
        trial.report(1.0, 100)
        study.tell(trial, 1e3 * params["trainer.lr"])  # the lr alone decides
    pruned = study.ask()
    search_mod.suggest(pruned, dict(sweep.search.space))
    pruned.report(0.5, 100)
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    lines = search_mod.write_report(sweep, tmp_path / "s", "sweep.py")
    best = study.best_trial
    assert lines[0] == (f"best trial: trial-{best.number:04d}, episode_return {best.value:.4g} with "
                        f"trainer.lr={best.params['trainer.lr']}, algo.clip_coef={best.params['algo.clip_coef']}")
    importances = dict(x.split(" ") for x in lines[1].split(": ", 1)[1].split(", "))
    assert float(importances["trainer.lr"]) > float(importances["algo.clip_coef"]), lines[1]
    md = (tmp_path / "s" / "search.md").read_text()
    assert "9 trials: 8 finished, 1 pruned, 0 failed" in md and "| trial-0008 | pruned |" in md
    assert (tmp_path / "s" / "search.png").stat().st_size > 1000


def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "search_sweep.py"
    path.write_text(f"""
from launch.sweep import Choice, LogUniform, Search, Sweep

def sweep():
    return Sweep(name="s", configs=["configs/cartpole_ppo.py"], seeds=[1],
                 overrides=["log.run_root={tmp_path}", "total_env_steps=16384", "algo.num_steps=32",
                            "log.wandb=disabled", "log.prometheus_port=-1", "log.progress=lines",
                            "checkpoint.every_updates=8"],
                 search=Search(space={{"trainer.lr": LogUniform(1e-4, 3e-3), "algo.clip_coef": Choice([0.1, 0.3])}},
                               trials=4, startup_trials=2, warmup_env_steps=2000, pruner="median", seed=3))
""")
    return path


@pytest.mark.slow  # ~1.5 minutes: a study of 4 CartPole trials, killed during one and run again
def test_a_killed_search_continues_its_study_and_reports_the_best_trial(tmp_path):
    path = sweep_file(tmp_path)
    cmd = [sys.executable, "-m", "launch.sweep", str(path)]
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = tmp_path / "s" / "trial-0001" / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 10):
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)  # no goodbye: the trial dies with it (SIGTERM: it checkpoints as it stops)
    first.communicate()
    time.sleep(5)  # the orphaned trial stops on its own (PR_SET_PDEATHSIG) and writes its checkpoint
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "(continued)" in again.stdout and "continuing trial-0001 of the study from its newest checkpoint" \
        in again.stdout, again.stdout
    log = (tmp_path / "s" / "logs" / "trial-0001.log").read_text()
    assert "-f trial-0001 --resume" in log, log
    from launch.sweep.spec import load_sweep

    study = search_mod.open_study(load_sweep(path), tmp_path / "s")
    states = [t.state for t in study.trials]
    assert len(states) == 4 and optuna.trial.TrialState.RUNNING not in states, states
    best = [x for x in again.stdout.splitlines() if x.startswith("best trial: trial-")]
    assert best and "episode_return" in best[0], again.stdout
    for t in study.trials:  # every trial's folder says how it ended, as the study does
        reason = json.loads((tmp_path / "s" / f"trial-{t.number:04d}" / "status.json").read_text())["reason"]
        assert reason == ("pruned" if t.state == optuna.trial.TrialState.PRUNED else "done"), (t.number, reason)


def test_slurm_runs_an_array_of_search_workers_sharing_the_study(tmp_path, capsys):
    from launch.sweep import cli

    path = sweep_file(tmp_path)
    assert cli.main([str(path), "--slurm", "--dry-run", "--jobs", "3"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --array=0-2\n" in script and "#SBATCH --job-name=sweep/s\n" in script, script
    assert f'-m launch.sweep {path.resolve()} --search-worker' in script
    assert f"#SBATCH --output={tmp_path}/s/logs/slurm-%A_%a.log" in script
    assert not (tmp_path / "s" / "study.journal").exists()  # a dry run creates nothing
