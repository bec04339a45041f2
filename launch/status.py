"""``python -m launch.status RUN_DIR``: how a trial ended, or what a running trial's workers do and what bounds it.

    python -m launch.status runs/cartpole_ppo/<trial>                       # a run folder, as launch.play takes
    python -m launch.status runs/cartpole_ppo                               # every trial of an experiment folder
    python -m launch.status -e atari_ppo_distributed -f pong1               # local or Slurm alike
    python -m launch.status -e atari_ppo_distributed                        # every trial: ended how, or running
    python -m launch.status -e atari_ppo_distributed -f pong1 --interval 20 # longer window (slow updates)

Reads ``RUN_DIR/prometheus_targets.json`` (every worker's endpoint, ``srljax/telemetry/exporter.py``),
scrapes every endpoint twice ``--interval`` seconds apart and prints, per role: workers answering,
busy fraction, throughput and queue depths, the share of wall time in each phase, and one sentence
naming what bounds the run (env stepping, inference, the trainer's update, sample transport or
params transport) with the figures that show it, and the settings that move it; last, the layout planner's
predicted env steps/s and bound for the trial's layout beside the live rate (``predicted_vs_live``: the unit costs
``python -m launch.plan CFG --measure`` recorded under the trial's run root). A trial that has ended
is reported from its ``status.json`` (exit 0; ``launch.local`` writes one for a single-process run too, and a
folder without one whose metrics reached the trial's last update reads as finished) with its last metrics line (a distributed population's or
league's: its members' ``members/<i>/metrics.jsonl`` together, as its launcher prints them). For a Slurm
trial (``slurm/job.json`` in the run folder) the job's state per group comes first (``python -m launch.slurm
status``).

``summarise`` (scraped values -> ``RoleFigures``) and ``diagnose`` (figures -> the sentence) are
pure functions; ``tests/test_status.py`` feeds them synthetic metrics for each case.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from srljax.config.psro import ended_by_metrics
from srljax.layout import ACTOR, BUFFER, POLICY, TRAINER
from srljax.telemetry.progress import last_json_line, trial_record
from srljax.telemetry.prometheus import Target, read_targets, scrape, values

INTERVAL_S = 5.0
SWEEP_FOLDERS = ("logs", "slurm")  # a sweep's own folders beside its trials (launch/sweep)
BUSY = 0.75  # a role whose workers are busy this share of their time is the bound
HELD_BACK = 0.30  # actors waiting this share of their time on the sinks or for params are held back

ENV, INFERENCE, UPDATE, SAMPLES, PARAMS = ("env stepping", "inference", "the trainer's update", "sample transport",
                                          "params transport")
CAUSES = (ENV, INFERENCE, UPDATE, SAMPLES, PARAMS)

THROUGHPUT = {  # role -> counters reported per second (summed over the role's workers)
    ACTOR: ("env_steps", "segments"), POLICY: ("rows", "batches"), BUFFER: ("env_steps", "segments"),
    TRAINER: ("updates", "env_steps"),
}
BUSY_PHASES = {TRAINER: ("compute/update",)}
"""Roles whose busy time is these phases (the trainer's loop waits while its update runs); any other
role is busy whenever it does not wait on another worker (every ``wait/*`` phase but ``wait/env``: an
actor's env stepping is its work; a policy worker's decoding and replying are part of inference)."""
FIGURES = {  # role -> {name: sample key} read from the endpoints' windows (mean over workers)
    ACTOR: {"inference latency p50 ms": 'srljax_latency_inference_ms{stat="p50"}'},
    POLICY: {"batch fill": 'srljax_batch_fill{stat="mean"}'},
    TRAINER: {"update s p50": 'srljax_time_update_s{stat="p50"}'},
    BUFFER: {"reanalyse s/sample": "srljax_reanalyse_seconds_per_sample", "reanalysed share": "srljax_reanalyse_share",
             "target lag": "srljax_reanalyse_target_lag"},  # MuZero's buffers (search_buffer.py); absent elsewhere
}


@dataclass(frozen=True)
class RoleFigures:
    """One role over the window between two scrapes (shares: of wall time, mean over its workers)."""

    role: str
    count: int
    busy: float
    throughput: dict[str, float] = field(default_factory=dict)  # counter -> per second, summed
    shares: dict[str, float] = field(default_factory=dict)  # phase -> share of wall time
    queues: dict[str, float] = field(default_factory=dict)  # queue gauge -> summed over workers
    figures: dict[str, float] = field(default_factory=dict)  # FIGURES, and "policy lag" for the trainer


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # one of CAUSES
    sentence: str

    @property
    def fix(self) -> str:
        """The settings that move this bound (``FIXES``)."""
        return f"To move it: {FIXES[self.cause]}."


FIXES = {
    ENV: "more actors (layout.num_actors) or envs per actor (env.num_envs), if cores are free; layout.ring_size=2 "
         "steps one half of an actor's envs while the other half waits for actions",
    INFERENCE: "more policy workers (layout.num_policy_workers), layout.ring_size=2 to overlap inference with env "
               "steps, or layout.inference=inline for a small network (actors act themselves, no round trip)",
    UPDATE: "more trainer devices or hosts (trainer.num_hosts), fewer passes over each batch (trainer.update_epochs, "
            "trainer.num_minibatches), or a smaller network; more actors will not help",
    SAMPLES: "buffer workers to merge segments (layout.num_buffer_workers), fewer, larger segments (algo.num_steps), "
             "or a trainer that keeps up (see its update time)",
    PARAMS: "a looser lag bound (trainer.max_policy_lag, layout.max_segments_ahead) or params published after "
            "every update (trainer.publish_every=1)",
}


# -- figures from two scrapes ------------------------------------------------------------------------------
def summarise(scrapes: list[tuple[str, Mapping[str, float], Mapping[str, float], float]]) -> dict[str, RoleFigures]:
    """``scrapes``: per worker (role, values at the first scrape, at the second, seconds between them),
    values as ``srljax.telemetry.prometheus.values`` flattens them. Returns the figures of every role."""
    by_role: dict[str, list[tuple[Mapping[str, float], Mapping[str, float], float]]] = defaultdict(list)
    for role, before, after, dt, *_ in scrapes:  # a fifth item (the address, from ``measure``) is not needed here
        by_role[role].append((before, after, max(dt, 1e-9)))
    return {role: _role(role, workers) for role, workers in sorted(by_role.items())}


def _delta(before: Mapping[str, float], after: Mapping[str, float], key: str) -> float:
    return max(0.0, after.get(key, 0.0) - before.get(key, 0.0))


def _role(role: str, workers: list[tuple[Mapping[str, float], Mapping[str, float], float]]) -> RoleFigures:
    n = len(workers)
    shares: dict[str, float] = defaultdict(float)
    throughput: dict[str, float] = defaultdict(float)
    queues: dict[str, float] = defaultdict(float)
    figures: dict[str, float] = defaultdict(float)
    prefix = 'srljax_time_seconds_total{phase="'
    for before, after, dt in workers:
        for key in after:
            if key.startswith(prefix):
                shares[key[len(prefix):-2]] += _delta(before, after, key) / dt / n
            elif key.startswith("srljax_queue_"):
                queues[key[len("srljax_queue_"):]] += after[key]
        for counter in THROUGHPUT.get(role, ()):
            throughput[counter] += _delta(before, after, f"srljax_{counter}_total") / dt
        for name, key in FIGURES.get(role, {}).items():
            if key in after or role != BUFFER:  # a buffer's reanalyse figures: MuZero's buffers only
                figures[name] += after.get(key, 0.0) / n
        if role == TRAINER:  # the lag of the columns taken in the window (whole run if none came)
            count = _delta(before, after, "srljax_lag_received_count")
            lag = (_delta(before, after, "srljax_lag_received_sum") / count if count else
                   after.get("srljax_lag_received_sum", 0.0) / max(after.get("srljax_lag_received_count", 0.0), 1.0))
            figures["policy lag"] += lag / n
    if role in BUSY_PHASES:
        busy = sum(shares.get(phase, 0.0) for phase in BUSY_PHASES[role])
    else:
        busy = 1.0 - sum(v for k, v in shares.items() if k.startswith("wait/") and k != "wait/env")
    return RoleFigures(role, n, min(max(busy, 0.0), 1.0), dict(throughput), dict(shares), dict(queues), dict(figures))


# -- the diagnosis -------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def diagnose(roles: Mapping[str, RoleFigures]) -> Diagnosis:
    """Name what bounds the run, with the figures that show it.

    1. the trainer updates >= ``BUSY`` of the time: its update (nothing else can go faster);
    2. policy workers busy >= ``BUSY``: inference;
    3. actors wait >= ``HELD_BACK`` of their time on the sinks (``wait/push``) or for newer params
       (``wait/lag_limit``) while the trainer is not busy: samples, or params, do not travel fast
       enough (whichever wait is larger);
    4. else the actors are the producers, and what they spend their time on bounds the run: env
       stepping (``wait/env``) or inference (``wait/inference``, remote; ``compute/act``, inline).
    """
    trainer, policy, actor, buffer = (roles.get(r) for r in (TRAINER, POLICY, ACTOR, BUFFER))
    trainer_busy = trainer.busy if trainer else 0.0
    actor_line = ""
    if actor:
        waits = {k: v for k, v in sorted(actor.shares.items(), key=lambda kv: -kv[1]) if v >= 0.01}
        actor_line = "actors' time: " + ", ".join(f"{k} {_pct(v)}" for k, v in waits.items())
    updates = ""
    if trainer:
        update_s = trainer.figures.get("update s p50", 0.0)
        updates = (f"{TRAINER}{'s' if trainer.count > 1 else ''} updating {_pct(trainer_busy)} of the time "
                   f"({trainer.throughput.get('updates', 0.0):.2f} updates/s"
                   + (f", {update_s:.2f} s each" if update_s else "") + ")")
    if trainer and trainer_busy >= BUSY:
        return _said(UPDATE, f"{updates}; {actor_line}" if actor_line else updates)
    if policy and policy.busy >= BUSY:
        return _said(INFERENCE, f"policy workers busy {_pct(policy.busy)} of the time "
                                f"({policy.throughput.get('rows', 0.0):,.0f} rows/s, batch fill "
                                f"{_pct(policy.figures.get('batch fill', 0.0))}); {actor_line}")
    if actor is None:
        return _said(UPDATE if trainer else ENV, updates or "no actors answered")
    push, lag = actor.shares.get("wait/push", 0.0), actor.shares.get("wait/lag_limit", 0.0)
    starved = f"; {updates}" if updates else ""
    if push + lag >= HELD_BACK:
        if push >= lag:
            via = (f"; buffers wait {_pct(buffer.shares.get('wait/push', 0.0))} of the time to push to the trainer"
                   if buffer else "")
            held = trainer.queues.get("pending_columns", 0.0) if trainer else 0.0
            return _said(SAMPLES, f"actors wait {_pct(push)} of their time to push segments{via}{starved}"
                                  + (f" and hold {held:g} columns of a batch" if trainer else ""))
        lag_text = f", policy lag {trainer.figures.get('policy lag', 0.0):.1f} versions" if trainer else ""
        return _said(PARAMS, f"actors wait {_pct(lag)} of their time for newer params (the lag throttle){starved}"
                             f"{lag_text}")
    env = actor.shares.get("wait/env", 0.0)
    infer = actor.shares.get("wait/inference", 0.0) + actor.shares.get("wait/request_send", 0.0) \
        + actor.shares.get("compute/act", 0.0)
    if infer > env:
        latency = actor.figures.get("inference latency p50 ms", 0.0)
        extra = (f" (round trip p50 {latency:.1f} ms; policy workers busy {_pct(policy.busy)})" if policy else
                 " (inline, compute/act)")
        return _said(INFERENCE, f"actors spend {_pct(infer)} of their time on inference{extra} and {_pct(env)} "
                                f"waiting for their envs{starved}")
    return _said(ENV, f"actors spend {_pct(env)} of their time waiting for their envs to step and {_pct(infer)} "
                      f"on inference ({actor.throughput.get('env_steps', 0.0):,.0f} env steps/s){starved}")


def _said(cause: str, figures: str) -> Diagnosis:
    return Diagnosis(cause, f"Bound by {cause}: {figures}.")


# -- the report ----------------------------------------------------------------------------------------------
def report(roles: Mapping[str, RoleFigures], diagnosis: Diagnosis, interval: float) -> list[str]:
    lines = [f"over {interval:.1f} s:", f"  {'role':<10} {'count':>5} {'busy':>5}  {'throughput':<36} queues"]
    for r in roles.values():
        rates = ", ".join(f"{v:,.2f} {k.replace('_', ' ')}/s" if v < 10 else f"{v:,.0f} {k.replace('_', ' ')}/s"
                          for k, v in r.throughput.items())
        queues = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in sorted(r.queues.items())) or "-"
        lines.append(f"  {r.role:<10} {r.count:>5} {_pct(r.busy):>5}  {rates or '-':<36} {queues}")
    lines.append("  time per worker (share of wall time):")
    for r in roles.values():
        shares = ", ".join(f"{k} {_pct(v)}" for k, v in sorted(r.shares.items(), key=lambda kv: -kv[1]) if v >= 0.005)
        figures = ", ".join(f"{k} {v:.3g}" for k, v in r.figures.items())
        if shares or figures:
            lines.append(f"    {r.role:<10} {shares}" + (f"; {figures}" if figures else ""))
    lines += [diagnosis.sentence, diagnosis.fix]
    return lines


def measure(targets: list[Target], interval: float) -> tuple[list[tuple[str, dict, dict, float, str]], list[str]]:
    """Scrape every target twice, ``interval`` s apart; (per worker answering both times: role, values before,
    after, seconds between, address; problems)."""
    def once(target: Target) -> tuple[float, dict[str, float] | None, str]:
        try:
            return time.monotonic(), values(scrape(target.address)), ""
        except (OSError, ValueError) as error:
            return time.monotonic(), None, str(error)

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(targets)))) as pool:
        first = list(pool.map(once, targets))
        time.sleep(interval)
        second = list(pool.map(once, targets))
    out, problems = [], []
    for target, (t0, before, e0), (t1, after, e1) in zip(targets, first, second):
        name = f"{target.labels.get('role', '?')}/{target.labels.get('index', '?')}"
        if before is None or after is None:
            problems.append(f"{name} at {target.address} did not answer: {e0 or e1}")
        elif target.labels.get("role") != "controller":
            out.append((target.labels.get("role", "?"), before, after, t1 - t0, target.address))
    return out, problems


def cpu_picture(scrapes: list[tuple]) -> list[str]:
    """Per host: the cores the trial's processes used between the scrapes (each process once, by role) against
    the cores a process there may use; a note when the host is full (more workers there add no throughput)."""
    hosts: dict[str, dict[float, tuple[str, float, float]]] = defaultdict(dict)
    for role, before, after, dt, address in scrapes:
        pid = after.get("srljax_process_id")
        if pid is None or "process_cpu_seconds_total" not in after:
            continue
        used = _delta(before, after, "process_cpu_seconds_total") / max(dt, 1e-9)
        host = hosts[address.rsplit(":", 1)[0]]
        roles = "+".join(sorted({role, *host[pid][0].split("+")})) if pid in host else role  # threads: one process
        host[pid] = (roles, used, after.get("srljax_host_cpus", 0.0))
    lines = []
    for host, processes in sorted(hosts.items()):
        by_role: dict[str, float] = defaultdict(float)
        for role, used, _ in processes.values():
            by_role[role] += used
        total, cores = sum(by_role.values()), max(c for _, _, c in processes.values())
        roles = ", ".join(f"{r} {v:.2f}" for r, v in sorted(by_role.items(), key=lambda kv: -kv[1]))
        full = (" - the host is full: more workers here will not add throughput; spread them over more hosts"
                if cores and total >= 0.9 * cores else "")
        lines.append(f"  cpu on {host}: {total:.2f} of {cores:g} cores used by the trial's processes ({roles}){full}")
    return lines


def live_sps(roles: Mapping[str, RoleFigures]) -> float | None:
    """Env steps/s the trainer took over the window (the actors' where no trainer answered)."""
    for role in (TRAINER, ACTOR):
        if role in roles and "env_steps" in roles[role].throughput:
            return roles[role].throughput["env_steps"]
    return None


def predicted_vs_live(run_dir: Path, roles: Mapping[str, RoleFigures], cores: int | None = None) -> list[str]:
    """The sizing model's env steps/s and bound for the trial's layout (``launch.plan.predicted_for_run``: the
    unit costs ``launch.plan --measure`` recorded under the trial's run root) beside the live rate."""
    import os

    from launch.plan import predicted_for_run
    from srljax.config import from_dict

    try:
        cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return []
    live = live_sps(roles)
    live_text = f"live {live:,.0f} env steps/s at the {TRAINER if TRAINER in roles else ACTOR}" if live is not None \
        else "no live env steps/s"
    found = predicted_for_run(cfg, run_dir, cores or os.cpu_count() or 1)
    if isinstance(found, str):
        return [f"  predicted vs live: {live_text}; no prediction ({found})"]
    pred, path, cluster = found
    ratio = f" = {live / pred.sps:.2f} of predicted" if live is not None and pred.sps > 0 else ""
    return [f"  predicted vs live: predicted {pred.sps:,.0f} env steps/s, bound by {pred.bound}, policy lag "
            f"~{pred.lag:.1f} (the plan's model for this layout on {cluster.nodes} node(s) x {cluster.cores_per_node:g} "
            f"cores, unit costs {path}); {live_text}{ratio}"]


def last_record(run_dir: Path) -> dict:
    """The trial's last metrics line as its launcher reads it (``trial_record``: a distributed population's or
    league's members together); the folder's ``metrics.jsonl`` where its ``config.json`` cannot be read."""
    from srljax.config import from_dict

    try:
        cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):  # a missing, old or broken config: the plain file it is
        return last_json_line(run_dir / "metrics.jsonl")
    return trial_record(cfg, run_dir)


def reached_end(run_dir: Path) -> dict:
    """The last metrics line where it reached the trial's last update or ``total_env_steps`` ({} otherwise, or
    where ``config.json`` cannot be read): a single-process trial run from a notebook writes no ``status.json``."""
    from srljax.config import from_dict

    try:
        cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    last = trial_record(cfg, run_dir)
    if last and ended_by_metrics(cfg, int(last.get("update", 0)), int(last.get("env_steps", 0))):
        return last
    return {}


def ended_status(run_dir: Path) -> str | None:
    """How the trial ended, from ``status.json``, if it has ended: a ``status.json`` older than the workers'
    targets (written as a run starts) belongs to an earlier run of a resumed trial, which is running again.
    Without a ``status.json``, a trial whose metrics reached its last update has finished."""
    status, targets = run_dir / "status.json", run_dir / "prometheus_targets.json"
    try:
        record = json.loads(status.read_text())
        if targets.exists() and targets.stat().st_mtime > status.stat().st_mtime:
            return None
    except (OSError, ValueError):
        if not status.exists() and (last := reached_end(run_dir)):
            return (f"ended, finished (its metrics reached the last update; no status.json): {last.get('update')} "
                    f"updates, {int(last.get('env_steps', 0)):,} env steps" + _return_text(last))
        return None
    last = last_record(run_dir)
    head = "finished" if record.get("exit_code") == 0 else "FAILED"
    message = str(record.get("message", "")).splitlines()[0] if record.get("message") else ""
    return (f"ended, {head} ({record.get('reason', '?')}, exit code {record.get('exit_code', '?')}): {message}"
            + (f"; last metrics line: {last.get('update')} updates, {int(last.get('env_steps', 0)):,} env steps"
               + _return_text(last) if last else ""))


def _return_text(record: dict) -> str:
    value = record.get("episode_return")
    return f", recent mean episode return {value:.1f}" if isinstance(value, (int, float)) else ""


def list_trials(experiment: Path) -> int:
    """``-e`` alone: one line per trial folder (ended and how, or running or not started)."""
    trials = sorted(p for p in experiment.iterdir() if p.is_dir() and p.name not in SWEEP_FOLDERS) \
        if experiment.is_dir() else []
    if not trials:
        print(f"no trials in {experiment}", file=sys.stderr)
        return 1
    for run_dir in trials:
        now = ended_status(run_dir)
        if now is None:
            last = last_record(run_dir)
            now = (f"running or stopped without a status: {last.get('update')} updates, "
                   f"{int(last.get('env_steps', 0)):,} env steps" if last else "no metrics yet")
        print(f"{run_dir.name}: {now}", flush=True)
    return 0


def _slurm_lines(run_dir: Path, name: str) -> list[str]:
    if not (run_dir / "slurm" / "job.json").exists():
        return []
    try:
        from launch.slurm.jobs import SlurmError
        from launch.slurm.trial import Trial, status_lines

        return status_lines(Trial(run_dir), name)
    except (OSError, SlurmError) as error:  # no Slurm commands here (e.g. on a laptop, reading a shared folder)
        return [f"{name}: Slurm job state unavailable ({error})"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch.status", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", help="a trial's run folder (runs/<experiment>/<trial>, as launch.play "
                        "takes), or an experiment's folder (every trial, one line each); or give -e [-f]")
    parser.add_argument("-e", "--experiment", help="experiment name (the run folder's parent)")
    parser.add_argument("-f", "--trial", help="trial name (without it: every trial of the experiment, one line each)")
    parser.add_argument("--run-root", default="runs", help="run root (default: runs, the configs' log.run_root)")
    parser.add_argument("--interval", type=float, default=INTERVAL_S,
                        help=f"seconds between the two scrapes (default {INTERVAL_S:g}; several updates' worth is best)")
    args = parser.parse_args(argv)
    if args.run_dir is not None:
        if args.experiment or args.trial:
            parser.error("give a run folder or -e EXP [-f TRIAL], not both")
        run_dir = Path(args.run_dir)
        if not run_dir.is_dir():
            print(f"python -m launch.status: {run_dir} is not a folder: give a trial's run folder "
                  "(runs/<experiment>/<trial>) or an experiment's (runs/<experiment>)", file=sys.stderr)
            return 2
        if not (run_dir / "config.json").exists():  # an experiment's folder: its trials
            return list_trials(run_dir)
        name = f"{run_dir.parent.name}/{run_dir.name}"
    elif not args.experiment:
        parser.error("give a run folder (runs/<experiment>/<trial>) or -e EXP [-f TRIAL]")
    elif not args.trial:
        return list_trials(Path(args.run_root) / args.experiment)
    else:
        run_dir = Path(args.run_root) / args.experiment / args.trial
        name = f"{args.experiment}/{args.trial}"
    for line in _slurm_lines(run_dir, name):
        print(line, flush=True)
    if (ended := ended_status(run_dir)) is not None:
        print(f"{name}: {ended}", flush=True)
        return 0
    try:
        targets = read_targets(run_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    print(f"{name}: scraping {len(targets)} endpoints listed in {run_dir / 'prometheus_targets.json'} "
          f"twice, {args.interval:g} s apart", flush=True)
    scrapes, problems = measure(targets, args.interval)
    for problem in problems:
        print(f"  {problem}", flush=True)
    if not scrapes:
        print(f"{name}: no worker answered: has the trial ended? (status.json: {run_dir / 'status.json'})",
              file=sys.stderr)
        return 1
    roles = summarise(scrapes)
    print("\n".join(report(roles, diagnose(roles), args.interval) + cpu_picture(scrapes)
                    + predicted_vs_live(run_dir, roles)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
