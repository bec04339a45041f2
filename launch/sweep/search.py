"""A sweep that names a search space: Optuna draws each trial's values, prunes the ones that fall behind.

    python -m launch.sweep configs/sweeps/cartpole_search.py            # runs the budget, then search.md
    python -m launch.sweep configs/sweeps/cartpole_search.py            # again: continues the study where it stopped
    python -m launch.sweep configs/sweeps/cartpole_search.py --report   # search.md and search.png from the study
    python -m launch.sweep configs/sweeps/cartpole_search.py --slurm    # a job array of search workers

The study lives in the sweep's folder (``runs/<sweep>/study.journal``, Optuna's journal file, which several
processes and Slurm nodes on a shared filesystem may write at once). Each trial is ``python -m launch.local CONFIG
-e SWEEP -f trial-NNNN OVERRIDES`` with the values the sampler (``tpe`` or ``random``, ``Search.sampler``) drew;
while it runs, every new ``metrics.jsonl`` line's ``Search.metric`` is reported to the pruner (``median`` or
``halving``) at its ``env_steps``. A trial the pruner stops is sent SIGINT, as Ctrl-C: it writes its final checkpoint
and ends, its ``status.json`` then says ``pruned`` (exit code 0, ``launch.status`` reads it) and the study records it
pruned. A finished trial's value is its last line's metric. Killing the sweep and running it again continues the
study: its trials in flight continue from their newest checkpoints (``launch.local --resume``) under the same Optuna
trial, and new trials are drawn until ``Search.trials`` have been started.

Every value the space can take at its ends (and every choice) is checked with the config before anything starts
(``srljax/prepare.py``), so a bad key or range is one error at launch, not a failed trial. ``search.md`` lists the
trials, names the best one and the importance of each parameter (Optuna's fANOVA); ``search.png`` is a slice plot
(each parameter against the metric, pruned trials at their last reported value).

optuna is optional: ``pip install -e '.[search]'``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.sweep.local import POLL_S, Running, _finish, _signal, _start, log_path
from launch.sweep.spec import Choice, IntRange, LogUniform, Search, Sweep, TrialSpec, Uniform, value_text
from launch.sweep.trials import PARTIAL, Planned, read_records, trial_state
from srljax.config import ConfigError, Experiment, apply_overrides, load_file

STUDY_FILE = "study.journal"
TRIAL_PREFIX = "trial-"
EXTRA = "search"  # the pyproject extra that installs optuna


def need_optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError([f"Sweep.search needs optuna, which is not installed: pip install -e '.[{EXTRA}]'"]) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


# -- configs ------------------------------------------------------------------------------------------------
def trial_name(number: int) -> str:
    return f"{TRIAL_PREFIX}{number:04d}"


def overrides_of(sweep: Sweep, params: dict[str, Any]) -> tuple[str, ...]:
    """The sweep's overrides, then the drawn values (in the space's order), then the seed."""
    return (*sweep.overrides, *(f"{k}={value_text(params[k])}" for k in sweep.search.space if k in params),
            f"seed={sweep.seeds[0]}")


def planned_trial(sweep: Sweep, base: Experiment, number: int, params: dict[str, Any]) -> Planned:
    """Trial ``number`` with ``params`` as ``launch.local`` will run it; ConfigError if the values do not apply."""
    overrides = overrides_of(sweep, params)
    cfg = apply_overrides(base, list(overrides))
    cfg = dataclasses.replace(cfg, name=sweep.name, trial=trial_name(number))
    point = tuple((k, value_text(params[k])) for k in sweep.search.space if k in params)
    spec = TrialSpec(trial_name(number), sweep.configs[0], point, sweep.seeds[0], overrides)
    return Planned(spec, cfg, *trial_state(cfg))


def ends(dist: Any) -> list[Any]:
    """The values a distribution can take at its ends (every one of a Choice)."""
    if isinstance(dist, Choice):
        return list(dist.values)
    return [dist.low, dist.high]


def check(sweep: Sweep) -> Experiment:
    """The config file loaded (``ConfigError`` listing every problem): the sweep's overrides and each end of each
    parameter's range applied and checked as ``launch.local`` checks a config (the env's checks once)."""
    from srljax.prepare import problems as check_problems

    try:
        base = load_file(sweep.configs[0])
    except ConfigError:
        raise
    except Exception as err:  # a config file that does not import or whose experiment() raises
        raise ConfigError([f"config file {sweep.configs[0]}: {type(err).__name__}: {err}"]) from None
    found: list[str] = []
    memo: dict[Any, list[str]] = {}
    middle = {k: ends(d)[0] for k, d in sweep.search.space.items()}
    for key, dist in sweep.search.space.items():
        for value in ends(dist):
            params = {**middle, key: value}
            try:
                cfg = apply_overrides(base, list(overrides_of(sweep, params)))
            except ConfigError as err:
                found += [f"Search.space[{key!r}] at {value_text(value)}: {p}" for p in err.problems]
                continue
            cfg = dataclasses.replace(cfg, name=sweep.name, trial=trial_name(0))
            found += [f"Search.space[{key!r}] at {value_text(value)}: {p}" if key in p else p
                      for p in check_problems(cfg, memo=memo)]
    if found:
        raise ConfigError(list(dict.fromkeys(found)))
    return base


def sweep_dir_of(sweep: Sweep, base: Experiment) -> Path:
    return Path(apply_overrides(base, list(sweep.overrides)).log.run_root) / sweep.name


# -- the study ----------------------------------------------------------------------------------------------
def open_study(sweep: Sweep, sweep_dir: Path) -> Any:
    """The sweep's study, created or loaded from ``sweep_dir/study.journal``."""
    optuna = need_optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    s = sweep.search
    sweep_dir.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / STUDY_FILE)))
    sampler = (optuna.samplers.TPESampler(seed=s.seed, n_startup_trials=s.startup_trials) if s.sampler == "tpe"
               else optuna.samplers.RandomSampler(seed=s.seed))
    pruner = {"median": lambda: optuna.pruners.MedianPruner(n_startup_trials=s.startup_trials,
                                                            n_warmup_steps=s.warmup_env_steps),
              "halving": lambda: optuna.pruners.SuccessiveHalvingPruner(
                  min_resource=max(1, s.warmup_env_steps) if s.warmup_env_steps else "auto", reduction_factor=3),
              "none": lambda: optuna.pruners.NopPruner()}[s.pruner]()
    return optuna.create_study(study_name=sweep.name, storage=storage, sampler=sampler, pruner=pruner,
                               direction=s.direction, load_if_exists=True)


def suggest(trial: Any, space: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, dist in space.items():
        if isinstance(dist, LogUniform):
            out[key] = trial.suggest_float(key, dist.low, dist.high, log=True)
        elif isinstance(dist, Uniform):
            out[key] = trial.suggest_float(key, dist.low, dist.high)
        elif isinstance(dist, IntRange):
            out[key] = trial.suggest_int(key, dist.low, dist.high, log=dist.log)
        else:
            out[key] = trial.suggest_categorical(key, list(dist.values))
    return out


@dataclass
class Live:
    """A trial running here: its process, its Optuna trial and what of its metrics was reported."""

    run: Running
    trial: Any
    offset: int = 0  # bytes of metrics.jsonl read so far
    reported: set[int] = field(default_factory=set)  # env steps reported
    last: float | None = None  # the newest metric value
    pruned_at: int | None = None  # env steps at which the pruner stopped it
    pruned_value: float | None = None  # the metric it was stopped at


def metric_value(record: dict[str, Any], metric: str) -> float | None:
    value = record.get(metric)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def read_new(live: Live, metric: str) -> list[tuple[int, float]]:
    """(env steps, metric) of the lines appended to the trial's metrics.jsonl since the last call."""
    path = live.run.planned.run_dir / "metrics.jsonl"
    try:
        with path.open("rb") as f:
            f.seek(live.offset)
            chunk = f.read()
    except OSError:
        return []
    complete = chunk[:chunk.rfind(b"\n") + 1]
    live.offset += len(complete)
    out = []
    for line in complete.decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if (value := metric_value(record, metric)) is not None:
            out.append((int(record.get("env_steps", 0)), value))
    return out


def observe(live: Live, search: Search) -> bool:
    """Report the trial's new lines to the pruner; True when it should stop now."""
    for step, value in read_new(live, search.metric):
        live.last = value
        if step in live.reported:
            continue
        live.reported.add(step)
        live.trial.report(value, step)
        if live.pruned_at is None and live.trial.should_prune():
            live.pruned_at, live.pruned_value = step, value
            return True
    return False


def write_pruned(run_dir: Path, search: Search, live: Live) -> None:
    from srljax.system.shell.controller import TrialResult, write_status

    last = "" if live.pruned_value is None else f" ({search.metric} {live.pruned_value:.4g})"
    write_status(run_dir, TrialResult(0, "pruned", f"pruned by the search's {search.pruner} pruner at "
                                                   f"{live.pruned_at:,} env steps{last}"))


# -- running trials -----------------------------------------------------------------------------------------
def run(sweep: Sweep, base: Experiment, sweep_dir: Path, jobs: int, *, adopt: bool = True) -> int:
    """Run the study's budget, ``jobs`` trials at a time; 0 when every trial ended (finished, pruned or failed: a
    failed trial is the study's data too, and named), 130 on Ctrl-C (the trials in flight stop with a checkpoint
    and continue at the next launch). ``adopt``: continue the study's trials left running by a killed launch
    (the local runner, which holds the sweep's lock; Slurm workers leave each other's trials alone)."""
    optuna = need_optuna()
    study = open_study(sweep, sweep_dir)
    s = sweep.search
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    orphans = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.RUNNING] if adopt else []
    running: list[Live] = []
    failed = 0
    try:
        while True:
            while len(running) < jobs:
                if orphans:
                    frozen = orphans.pop(0)
                    live = _continue(sweep, base, study, frozen, sweep_dir)
                elif len(study.get_trials(deepcopy=False)) < s.trials:
                    trial = study.ask()
                    params = suggest(trial, dict(s.space))
                    live = _begin(sweep, base, trial, params, sweep_dir, ())
                else:
                    break
                if live is not None:
                    running.append(live)
            if not running:
                break
            for live in list(running):
                if live.pruned_at is None and observe(live, s):
                    print(f"pruning {live.run.planned.spec.name} at {live.pruned_at:,} env steps ({s.metric} "
                          f"{live.pruned_value:.4g}): stopping it", flush=True)
                    _signal(live.run.proc, signal.SIGINT)
                if live.run.proc.poll() is not None:
                    running.remove(live)
                    failed += not _end(study, live, s)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        print(f"interrupted: stopping {len(running)} running trial(s); run the sweep again to continue the study",
              flush=True)
        for live in running:
            _signal(live.run.proc, signal.SIGINT)
        for live in running:
            try:
                live.run.proc.wait(timeout=30)
            except Exception:
                _signal(live.run.proc, signal.SIGKILL)
                live.run.proc.wait()
            _finish(live.run, sweep_dir)
        return 130
    if failed:
        print(f"{failed} trial(s) failed (see their logs under {sweep_dir / 'logs'}); the study has them as failed",
              flush=True)
    return 0


def _begin(sweep: Sweep, base: Experiment, trial: Any, params: dict[str, Any], sweep_dir: Path,
           extra: tuple[str, ...], reported: dict[int, float] | None = None) -> Live | None:
    try:
        planned = planned_trial(sweep, base, trial.number, params)
    except ConfigError as err:  # checked at its ends before launch: only a value inside a range can get here
        print(f"{trial_name(trial.number)}: {err}; the study records it as failed", flush=True)
        trial.study.tell(trial, state=_states().FAIL)
        return None
    trial.set_user_attr("trial", planned.spec.name)
    total = sweep.search.trials
    live = Live(_start(planned, extra, sweep_dir, trial.number + 1, total), trial)
    live.reported = set(reported or {})
    print(f"  {planned.spec.name}: " + ", ".join(f"{k}={v}" for k, v in planned.spec.point), flush=True)
    return live


def _continue(sweep: Sweep, base: Experiment, study: Any, frozen: Any, sweep_dir: Path) -> Live | None:
    """A trial a killed launch left running: resumed from its newest checkpoint, else run again from the start."""
    import optuna

    trial = optuna.trial.Trial(study, frozen._trial_id)
    planned = planned_trial(sweep, base, frozen.number, dict(frozen.params))
    from launch.sweep.trials import DONE, move_aside
    from srljax.storage import run_dir as run_folder

    if planned.state == DONE:  # it ended after the last launch's last look: tell the study how
        final = _final_value(planned.run_dir, sweep.search.metric)
        pruned = _json(planned.run_dir / "status.json").get("reason") == "pruned"
        if pruned or final is None:
            study.tell(trial, state=_states().PRUNED if pruned else _states().FAIL)
        else:
            study.tell(trial, final)
        print(f"{planned.spec.name} had ended: " + ("pruned" if pruned else "failed (no metrics line with "
              f"{sweep.search.metric})" if final is None else f"{sweep.search.metric} {final:.4g}"), flush=True)
        return None
    extra: tuple[str, ...] = ()
    if planned.state == PARTIAL:
        if found := run_folder.problems(planned.cfg, resume=True):  # no checkpoint, or other settings
            why = found[0]
            moved = move_aside(planned.run_dir)
            print(f"{planned.spec.name}: moved its partial run aside to {moved} ({why}); it runs again", flush=True)
        else:
            extra = ("--resume",)
    print(f"continuing {planned.spec.name} of the study" + (" from its newest checkpoint" if extra else ""),
          flush=True)
    return _begin(sweep, base, trial, dict(frozen.params), sweep_dir, extra, dict(frozen.intermediate_values))


def _states() -> Any:
    import optuna

    return optuna.trial.TrialState


def _end(study: Any, live: Live, search: Search) -> bool:
    """Tell the study how the trial ended; False when it failed."""
    states = _states()
    observe_rest(live, search)
    name, run_dir = live.run.planned.spec.name, live.run.planned.run_dir
    code = _finish(live.run, run_dir.parent)
    if live.pruned_at is not None and code in (0, 130):
        write_pruned(run_dir, search, live)
        study.tell(live.trial, state=states.PRUNED)
        print(f"pruned {name} at {live.pruned_at:,} env steps", flush=True)
        return True
    final = _final_value(run_dir, search.metric)
    if code == 0 and final is not None:
        study.tell(live.trial, final)
        print(f"{name}: {search.metric} {final:.4g}", flush=True)
        return True
    study.tell(live.trial, state=states.FAIL)
    why = "no metrics line with " + search.metric if code == 0 else f"exit code {code}"
    print(f"{name} FAILED ({why}); log: {log_path(run_dir.parent, name)}", flush=True)
    return False


def observe_rest(live: Live, search: Search) -> None:
    """The lines written since the last look, reported (the pruner is not asked again)."""
    for step, value in read_new(live, search.metric):
        live.last = value
        if step not in live.reported:
            live.reported.add(step)
            live.trial.report(value, step)


def _final_value(run_dir: Path, metric: str) -> float | None:
    values = [v for r in read_records(run_dir / "metrics.jsonl") if (v := metric_value(r, metric)) is not None]
    return values[-1] if values else None


# -- the report ---------------------------------------------------------------------------------------------
def write_report(sweep: Sweep, sweep_dir: Path, sweep_file: str) -> list[str]:
    """``search.md`` (and ``search.png`` where matplotlib is installed); returns the lines printed at the end."""
    optuna = need_optuna()
    study = open_study(sweep, sweep_dir)
    s = sweep.search
    states = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    keys = list(s.space)
    count = {name: sum(t.state == getattr(states, name) for t in trials)
             for name in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")}
    lines = [f"# Search {sweep.name}", "",
             f"`python -m launch.sweep {sweep_file}`: {sweep.configs[0]} at seed {sweep.seeds[0]}, {s.sampler} sampler, "
             f"{s.pruner} pruner on `{s.metric}` ({s.direction}), budget {s.trials} trials; study "
             f"`{sweep_dir / STUDY_FILE}`.", "",
             f"{len(trials)} trials: {count['COMPLETE']} finished, {count['PRUNED']} pruned, {count['FAIL']} failed, "
             f"{count['RUNNING']} running or stopped.", ""]
    done = [t for t in trials if t.state == states.COMPLETE]
    summary = []
    if done:
        best = study.best_trial
        params = ", ".join(f"{k}={value_text(best.params[k])}" for k in keys if k in best.params)
        summary.append(f"best trial: {best.user_attrs.get('trial', trial_name(best.number))}, {s.metric} "
                       f"{best.value:.4g} with {params}")
    else:
        summary.append("best trial: none yet (no trial finished)")
    importances = _importances(study, done)
    if importances:
        summary.append("parameter importances (fANOVA): " + ", ".join(f"{k} {v:.2f}" for k, v in importances.items()))
    lines += [f"**{x[0].upper()}{x[1:]}**" for x in summary[:1]] + [""]
    if importances:
        lines += ["| parameter | importance |", "| --- | --- |"]
        lines += [f"| `{k}` | {v:.3f} |" for k, v in importances.items()] + [""]
    lines += ["| trial | state | " + " | ".join(f"`{k}`" for k in keys) + f" | {s.metric} | last env steps | wall |",
              "| --- | --- | " + " | ".join("---" for _ in keys) + " | --- | --- | --- |"]
    for t in trials:
        name = t.user_attrs.get("trial", trial_name(t.number))
        value = t.value if t.state == states.COMPLETE else (t.intermediate_values[max(t.intermediate_values)]
                                                           if t.intermediate_values else None)
        steps = max(t.intermediate_values) if t.intermediate_values else 0
        record = _json(sweep_dir / "logs" / f"{name}.json")
        wall = f"{record['wall_s']:.0f} s" if isinstance(record.get("wall_s"), (int, float)) else "-"
        lines.append(f"| {name} | {t.state.name.lower()} | " + " | ".join(_fmt(t.params.get(k)) for k in keys)
                     + f" | {'-' if value is None else f'{value:.4g}'} | {steps:,} | {wall} |")
    note = plot_slices(study, s, sweep_dir / "search.png")
    lines += ["", note]
    (sweep_dir / "search.md").write_text("\n".join(lines) + "\n")
    return summary + [f"report: {sweep_dir / 'search.md'}" + (f" and {sweep_dir / 'search.png'}"
                                                                 if (sweep_dir / 'search.png').exists() else "")]


def _importances(study: Any, done: list[Any]) -> dict[str, float]:
    import optuna

    if len(done) < 2:
        return {}
    try:
        return dict(optuna.importance.get_param_importances(study))
    except (RuntimeError, ValueError):  # e.g. every finished trial drew the same values
        return {}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else value_text(value)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def plot_slices(study: Any, search: Search, path: Path) -> str:
    """One panel per parameter: its value against the metric (finished trials; pruned ones at their last
    reported value, hollow). Returns the report's line about it."""
    import optuna

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "search.png was not drawn: matplotlib is not installed"
    states = optuna.trial.TrialState
    keys = list(search.space)
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.5), squeeze=False)
    for ax, key in zip(axes[0], keys):
        dist = search.space[key]
        for state, style in ((states.COMPLETE, dict(marker="o", color="C0", label="finished")),
                             (states.PRUNED, dict(marker="o", facecolors="none", edgecolors="C3", label="pruned"))):
            points = [(t.params[key], t.value if state == states.COMPLETE else
                       t.intermediate_values[max(t.intermediate_values)])
                      for t in study.get_trials(deepcopy=False, states=(state,))
                      if key in t.params and (state == states.COMPLETE or t.intermediate_values)]
            if points:
                xs = [value_text(x) if isinstance(dist, Choice) else x for x, _ in points]
                ax.scatter(xs, [y for _, y in points], **style)
        if isinstance(dist, LogUniform) or (isinstance(dist, IntRange) and dist.log):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # decades only: no crowded labels
        ax.set_xlabel(key)
        ax.set_ylabel(search.metric)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return f"`search.png`: each parameter against `{search.metric}` (hollow: pruned trials at their last reported value)."


# -- the command line's part --------------------------------------------------------------------------------
def main(sweep: Sweep, args: Any, prog: str) -> int:
    """``python -m launch.sweep SWEEP.py`` for a sweep with ``search``: check, run (or --dry-run, --report,
    --slurm), report."""
    from launch.sweep.local import default_jobs, locked

    try:
        need_optuna()
        base = check(sweep)
    except ConfigError as err:
        print(f"{prog}: {args.sweep}: {err}\nno trial was started.", file=sys.stderr)
        return 2
    sweep_dir = sweep_dir_of(sweep, base)
    s = sweep.search
    jobs = args.jobs or default_jobs([apply_overrides(base, list(sweep.overrides))])
    if args.report:
        return _print_report(sweep, sweep_dir, args.sweep)
    if getattr(args, "search_worker", False):  # an array task of ``--slurm`` (launch/sweep/search_slurm.py)
        return run(sweep, base, sweep_dir, 1, adopt=False)  # trials one at a time; others' trials left alone
    study_exists = (sweep_dir / STUDY_FILE).exists()
    print(f"search {sweep.name}: {s.trials} trials of {sweep.configs[0]} over {', '.join(s.space)}; {s.sampler} "
          f"sampler, {s.pruner} pruner on {s.metric}; study {sweep_dir / STUDY_FILE}"
          + (" (continued)" if study_exists else ""), flush=True)
    if args.slurm:
        from launch.sweep.search_slurm import submit

        return submit(sweep, base, sweep_dir, args, prog)
    if args.dry_run:
        if study_exists:
            print("\n".join(write_report(sweep, sweep_dir, args.sweep)[:-1]), flush=True)
        print(f"would run up to {s.trials} trials, {jobs} at a time: python -m launch.local {sweep.configs[0]} "
              f"-e {sweep.name} -f {TRIAL_PREFIX}NNNN {' '.join(sweep.overrides)} <drawn values> seed={sweep.seeds[0]}")
        return 0
    with locked(sweep_dir) as holder:
        if holder:
            print(f"{prog}: another launch.sweep is running this sweep ({holder}); nothing was started.",
                  file=sys.stderr)
            return 1
        print(f"running trials {jobs} at a time", flush=True)
        code = run(sweep, base, sweep_dir, jobs)
    report = _print_report(sweep, sweep_dir, args.sweep)
    return code or report


def _print_report(sweep: Sweep, sweep_dir: Path, sweep_file: str) -> int:
    if not (sweep_dir / STUDY_FILE).exists():
        print(f"no study in {sweep_dir} yet: run the sweep first", file=sys.stderr)
        return 1
    print("\n".join(write_report(sweep, sweep_dir, sweep_file)), flush=True)
    return 0

