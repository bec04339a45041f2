"""``python -m launch.plan CFG [key=value ...]``: measure a config's unit costs, then size a layout for a cluster.

    python -m launch.plan configs/cartpole_ppo.py --measure                          # times each unit here
    python -m launch.plan configs/cartpole_ppo.py --nodes 1 --cores-per-node 2 --gpus-per-node 0
    python -m launch.plan configs/cartpole_ppo.py --nodes 64 --cores-per-node 48 --gpus-per-node 4 --write plan.py
    python -m launch.local plan.py                                                   # runs the planned layout

``--measure`` times, on this machine, every unit cost of the config (``launch/plan_measure.py``: env
step per env count, the inline actor's step, act per batch size, a request to a policy worker over real
sockets, the trainer's update at two batch sizes, sample bytes per env step, a trainer's ingest over
loopback TCP) and saves them as JSON in ``RUN_ROOT/plan/<config stem>-<digest>.json`` (``log.run_root``,
default ``runs``; the digest covers the env, algo, trainer and seed settings less the ones a plan sets
(``env.num_envs``, ``env.batch_size``, ``trainer.batch_envs``), so other overrides get their own file and a
planned run finds the costs it was planned from; ``--costs PATH`` names another). ``--nodes/--cores-per-node/--gpus-per-node`` reads them
back and prints the layout the model in ``srljax/sizing.py`` predicts fastest (counts per role, envs per
actor, inline or remote inference, buffers, workers per node), its predicted env steps/s, the tier that
bounds it and the policy lag; ``--top K`` prints the next K as well. ``--write PATH`` writes a config file
that is the given config with the planned overrides (``python -m launch.local PATH`` or
``python -m launch.slurm PATH`` take it as any config); a planned layout that the config checks refuse
(e.g. minibatches that do not divide the batch) is skipped for the next one, and said. ``python -m
launch.status RUN_DIR`` of a running distributed trial puts the model's prediction for the trial's own layout
(``predicted_for_run``, from the unit costs recorded under its run root) beside the live env steps/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

from srljax.config import ConfigError, Experiment, apply_overrides, load_file
from srljax.config.tree import to_dict
from srljax.sizing import Choice, Cluster, Costs, Prediction, Sized, overrides, placement, predict, rank, trainer_cores

PROG = "python -m launch.plan"


LAYOUT_KEYS = {"env": ("num_envs", "batch_size"), "trainer_config": ("batch_envs",)}
"""Settings the plan itself sets: left out of the unit costs' digest, so a planned run finds the costs it was
planned from (``recorded_costs``)."""


def costs_digest(cfg: Experiment) -> str:
    """What the unit costs of ``cfg`` depend on: the env, algo, trainer and seed settings, less ``LAYOUT_KEYS``."""
    d = to_dict(cfg)
    key = {**{k: d[k] for k in ("env", "algo", "seed")}, "trainer_config": to_dict(cfg.trainer)}
    key = {k: ({n: x for n, x in v.items() if n not in LAYOUT_KEYS.get(k, ())} if isinstance(v, dict) else v)
           for k, v in key.items()}
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:10]


def costs_path(cfg: Experiment, config: str) -> Path:
    """Where ``--measure`` saves the unit costs of ``cfg`` (and the plan reads them)."""
    return Path(cfg.log.run_root) / "plan" / f"{Path(config).stem}-{costs_digest(cfg)}.json"


def recorded_costs(cfg: Experiment, run_root: Path) -> Path | None:
    """The newest unit costs measured for ``cfg``'s settings under ``run_root`` (whatever config file they were
    measured from, and whatever layout ``cfg`` runs): None if there are none."""
    found = sorted((run_root / "plan").glob(f"*-{costs_digest(cfg)}.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def choice_of(cfg: Experiment) -> Choice:
    """The layout ``cfg`` runs, as the model describes one (``layout.ring_size`` and ``env.batch_size`` aside)."""
    remote = cfg.layout.inference == "remote"
    return Choice(cfg.layout.num_actors, cfg.env.num_envs, cfg.layout.inference,
                  cfg.layout.num_policy_workers if remote else 0, cfg.layout.num_buffer_workers)


def cluster_of(cfg: Experiment, slurm: bool, cores: int) -> Cluster:
    """The cluster a trial runs on, as the plan for it would have named it: this machine (``cores``) for a local
    trial; for a Slurm trial the trainer's node and ``slurm.actor.nodes`` more of ``slurm.node_cpus`` cores."""
    if not slurm:
        return Cluster(1, cores)
    return Cluster(1 + max(cfg.slurm.actor.nodes, 0), cfg.slurm.actor.node_cpus or cfg.slurm.node_cpus or cores)


def predicted_for_run(cfg: Experiment, run_dir: Path, cores: int) -> tuple[Prediction, Path, Cluster] | str:
    """The model's prediction for the trial in ``run_dir`` (its own layout, from the unit costs recorded under its
    run root), or why there is none."""
    if cfg.layout.mode != "distributed":
        return "a single-process trial: the plan sizes distributed layouts"
    run_root = run_dir.parent.parent
    path = recorded_costs(cfg, run_root)
    if path is None:
        return (f"no unit costs for these settings under {run_root / 'plan'}: `{PROG} CONFIG [OVERRIDES] --measure "
                f"log.run_root={run_root}` with the trial's env, algo and trainer settings records them")
    try:
        costs = Costs.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{path}: {err}"
    cluster = cluster_of(cfg, (run_dir / "slurm" / "job.json").exists(), cores)
    choice = choice_of(cfg)
    if choice.envs not in costs.actor or (choice.inference == "remote" and choice.envs not in costs.inference):
        return (f"{path} has no actor step measured at env.num_envs={choice.envs} (measured: "
                f"{sorted(costs.actor)}): measure again with --env-counts {choice.envs}")
    return predict(costs, choice, cluster, cfg.trainer.max_policy_lag), path, cluster


def load_costs(path: Path) -> Costs:
    if not path.exists():
        raise ConfigError([f"no unit costs at {path}: run `{PROG} CFG --measure` with the same overrides first "
                           "(or name a file with --costs)"])
    try:
        return Costs.from_dict(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError([f"{path}: {err}"]) from None


BUSY_SHARE = 0.25
"""unit costs measured while other jobs kept more than this share of the cores busy (at the start or the end of
``--measure``) get a note: their CPU inflates the act, the update and the actor process's CPU (session 26: Pong's
costs timed at load ~35 on the 2-core box planned 322 env steps/s, quiet ones 548; the run trained 469-519)."""


def load_note(path: Path) -> str:
    """A note when ``path``'s unit costs were measured on a busy machine ('' otherwise)."""
    try:
        machine = json.loads(path.read_text()).get("machine", {})
    except (OSError, ValueError):
        return ""
    cores = machine.get("cores") or 0
    busy = max(machine.get("other_cores", 0.0), machine.get("other_cores_end", 0.0))
    if not cores or busy <= BUSY_SHARE * cores:
        return ""
    return (f"  note: other jobs kept {busy:.2f} of the {cores} cores busy while the unit costs were measured: their "
            f"CPU inflates the costs and the plan; measure again (--measure) when the machine is quiet")


def accepted(cfg: Experiment, ranked: list[Sized], costs: Costs, cluster: Cluster, limit: int) -> tuple[list[Sized], list[str]]:
    """The first ``limit`` layouts whose overrides the config checks accept, and why the skipped ones were not."""
    from srljax.prepare import problems

    out, skipped, memo = [], [], {}  # memo: the env's own checks answered once for every candidate
    for sized in ranked:
        if len(out) >= limit:
            break
        try:
            found = problems(apply_overrides(cfg, overrides(sized.choice, costs, cluster)),
                             "processes" if cluster.nodes == 1 else "slurm", memo=memo)
        except ConfigError as err:
            found = err.problems
        if found:
            if len(skipped) < 3:
                skipped.append(f"{describe(sized)}: {found[0]}")
            continue
        out.append(sized)
    return out, skipped


def describe(sized: Sized) -> str:
    c = sized.choice
    inference = f"remote, {c.policy_workers} policy worker(s)" if c.inference == "remote" else "inline"
    return f"{c.actors} actors x {c.envs} envs, {inference}, {c.buffers} buffers"


def report(sized: Sized, costs: Costs, cluster: Cluster, lag_cap: int) -> str:
    c, p = sized.choice, sized.prediction
    lines = [f"layout: {c.actors} actor(s) x {c.envs} envs (trainer.batch_envs={c.batch_envs}, "
             f"{costs.num_steps} steps each), "
             + (f"remote inference at {c.policy_workers} policy worker(s)" if c.inference == "remote"
                else "inline inference")
             + f", {c.buffers} buffer worker(s), 1 trainer (its update keeps ~{trainer_cores(costs, c)} core(s) busy)",
             "placement:"]
    rows: list[tuple[list[int], str]] = []  # nodes with the same line are printed as one
    for load in placement(c, costs, cluster):
        roles = ", ".join(f"{k} {v}" for k, v in load.roles.items())
        busy = load.cpu_per_step * p.sps + load.fixed_cores
        text = (f"{roles}; {busy:.2f} of {cluster.cores_per_node} cores busy at the predicted rate"
                if roles else "idle (the layout needs no more nodes)")
        if rows and rows[-1][1] == text:
            rows[-1][0].append(load.node)
        else:
            rows.append(([load.node], text))
    for nodes, text in rows:
        name = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {nodes[0]}-{nodes[-1]}"
        lines.append(f"  {name}: {text}")
    queue = f" less {1 - p.queueing:.0%} for actors waiting for a core" if p.queueing < 0.995 else ""
    lines.append(f"predicted: {p.sps:,.0f} env steps/s, bound by {p.bound}{queue}; policy lag ~{p.lag:.1f} versions "
                 f"(cap trainer.max_policy_lag={lag_cap}); one actor step {p.actor_step_s * 1e3:.2f} ms")
    lines.append("tiers (env steps/s): " + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(p.tiers.items(),
                                                                                         key=lambda kv: kv[1])))
    return "\n".join(lines)


def write_config(path: Path, config: str, given: list[str], planned: list[str], summary: str) -> None:
    """A config file: ``config`` with the user's overrides, then the plan's (the plan's win)."""
    src = Path(config).resolve()
    body = (f'"""Planned by `{PROG} {config} {" ".join(given)}` on {time.strftime("%Y-%m-%d %H:%M")}.\n\n'
            + "\n".join("    " + line if line else "" for line in summary.splitlines()) + '\n"""\n\n'
            "from srljax.config import apply_overrides, load_file\n\n"
            f"BASE = {str(src)!r}\nGIVEN = {given!r}\nPLAN = {planned!r}\n\n\n"
            "def experiment():\n    return apply_overrides(load_file(BASE), GIVEN + PLAN)\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("config", help="config file exposing experiment(), e.g. configs/cartpole_ppo.py")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, as the launchers take them")
    parser.add_argument("--measure", action="store_true", help="time this config's unit costs here and save them")
    parser.add_argument("--costs", default="", help="unit costs file (default: RUN_ROOT/plan/<stem>-<digest>.json)")
    parser.add_argument("--seconds", type=float, default=1.0, help="--measure: seconds per timed unit")
    parser.add_argument("--env-counts", type=int, nargs="+", default=[1, 4, 16, 64],
                        help="--measure: envs per actor to time (the plan picks among these)")
    parser.add_argument("--nodes", type=int, default=None, help="plan for this many nodes")
    parser.add_argument("--cores-per-node", type=int, default=0)
    parser.add_argument("--gpus-per-node", type=int, default=0)
    parser.add_argument("--max-actors", type=int, default=0, help="plan: at most this many actors (0: no limit)")
    parser.add_argument("--top", type=int, default=0, help="plan: also print the next K layouts")
    parser.add_argument("--write", default="", help="plan: write a config file with the planned layout here")
    parser.add_argument("--json", default="", help="plan: write the plan (layout, prediction, tiers) as JSON here")
    args = parser.parse_intermixed_args(argv)
    if not args.measure and args.nodes is None:
        parser.error("say what to do: --measure, and/or --nodes N --cores-per-node C [--gpus-per-node G]")
    if args.nodes is not None and not args.cores_per_node:
        parser.error("--nodes needs --cores-per-node C (the cores of one node)")
    if any(n < 1 for n in args.env_counts):
        parser.error(f"--env-counts {args.env_counts}: every count must be at least 1")
    try:
        cfg = apply_overrides(load_file(args.config), args.overrides)
        path = Path(args.costs) if args.costs else costs_path(cfg, args.config)
        if args.measure:
            from launch.plan_measure import measure

            print(f"measuring the unit costs of {args.config} on this machine ({args.seconds:g} s per unit)", flush=True)
            measured = measure(cfg, args.seconds, args.env_counts)
            measured["config"] = {"file": args.config, "overrides": args.overrides}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(measured, indent=1))
            print(f"unit costs: {path}", flush=True)
        if args.nodes is None:
            return 0
        cluster = Cluster(args.nodes, args.cores_per_node, args.gpus_per_node)
        if cluster.problems():
            raise ConfigError(cluster.problems())
        costs = load_costs(path)
        lag_cap = cfg.trainer.max_policy_lag
        ranked = rank(costs, cluster, lag_cap, args.max_actors)
        found, skipped = accepted(cfg, ranked, costs, cluster, 1 + args.top)
    except ConfigError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    gpus = f", {cluster.gpus_per_node} GPU(s) each" if cluster.gpus_per_node else ", no GPUs"
    print(f"plan for {args.config} on {cluster.nodes} node(s) x {cluster.cores_per_node} cores{gpus} "
          f"(unit costs {path}, measured on {costs.device})")
    if note := load_note(path):
        print(note)
    if cluster.gpus_per_node and costs.device == "cpu":
        print("  note: the act and update costs were measured on CPU; measure on a GPU node for a GPU cluster's plan")
    for line in skipped:
        print(f"  skipped (the config checks refuse it): {line}")
    if not found:
        print(f"{PROG}: no layout the config accepts; first refusal: {skipped[0] if skipped else 'none measured'}",
              file=sys.stderr)
        return 2
    best = found[0]
    summary = report(best, costs, cluster, lag_cap)
    print(summary)
    planned = overrides(best.choice, costs, cluster)
    print("overrides: " + " ".join(planned))
    for other in found[1:]:
        print(f"  next: {describe(other)}: {other.prediction.sps:,.0f} env steps/s, bound by {other.prediction.bound}")
    if args.write:
        write_config(Path(args.write), args.config, args.overrides, planned, summary)
        print(f"written: {args.write} (python -m launch.local {args.write})")
    if args.json:
        Path(args.json).write_text(json.dumps({"choice": dataclasses.asdict(best.choice),
                                               "prediction": dataclasses.asdict(best.prediction),
                                               "overrides": planned, "costs": str(path), "steps": costs.num_steps,
                                               "max_policy_lag": lag_cap},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
