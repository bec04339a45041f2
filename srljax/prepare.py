"""One prepare pass for every entry point: all checks before launch, then the run folder, ``config.json`` and the
compile cache, done once.

    run = prepare(cfg, resume=False, backend="single")   # ConfigError (every problem at once) or RunFolderInUse
    run.cfg, run.plan, run.run_dir                        # the plan: srljax.layout.plan_of
    run = joined(cfg, run_dir, resume)                    # a process of a group of hosts: the launcher prepared it
    plan = check(cfg, resume, backend)                    # the checks only; creates nothing (--show, sweeps, Slurm)

Each owner's checks are registered once (``register``, at the end of this file): the config tree
(``srljax.config.problems``), its worker graph (``srljax.layout.layout_problems``), whether the algorithm and agent
table fit the env (``envs.fit_problems``), the checkpoints it loads, a replay's window and memory, the env itself
(``envs.problems``); launchers add theirs on import (Slurm: ``launch/slurm/plan.py``, threads: ``launch/threads.py``).
``check`` runs those of a backend and the run folder's (``srljax.storage.run_dir``, which also refuses a resume that
cannot continue) and reports every problem together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import envs
from srljax.config import ConfigError, Experiment, consumes, write_json
from srljax.config import problems as config_problems
from srljax.config.experiment import seed_trials
from srljax.layout import Plan, graph_consumes, layout_problems, plan_of
from srljax.selfplay import checkpoint_bot
from srljax.storage import run_dir as run_folder

BACKENDS = ("single", "threads", "processes", "slurm")


@dataclass(frozen=True)
class Check:
    owner: str
    problems: Callable[[Experiment], list[str]]
    backends: tuple[str, ...]
    key: Callable[[Experiment], str] | None = None
    """what its answer depends on, for a caller that checks many configs (a sweep's trials) with one memo."""


CHECKS: dict[str, Check] = {}


def register(owner: str, problems: Callable[[Experiment], list[str]], backends: tuple[str, ...] = BACKENDS,
             key: Callable[[Experiment], str] | None = None) -> None:
    """Add ``owner``'s checks for ``backends`` (once per owner; registering again replaces them)."""
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        raise ValueError(f"check {owner!r}: unknown backends {sorted(unknown)}; pick from {BACKENDS}")
    CHECKS[owner] = Check(owner, problems, tuple(backends), key)


def backend_of(cfg: Experiment) -> str:
    """The backend ``python -m launch.local`` uses for ``cfg``."""
    return "single" if cfg.layout.mode == "single" else "processes"


def problems(cfg: Experiment, backend: str | None = None, memo: dict | None = None,
             skip: tuple[str, ...] = ()) -> list[str]:
    """Every registered check's problems with ``cfg`` on ``backend`` (default: ``backend_of(cfg)``); no disk.
    ``memo``: answers of checks with a ``key`` kept across calls; ``skip``: owners not to ask."""
    backend = backend or backend_of(cfg)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; pick from {BACKENDS}")
    found: list[str] = []
    for check in CHECKS.values():
        if backend not in check.backends or check.owner in skip:
            continue
        if memo is not None and check.key is not None:
            key = (check.owner, check.key(cfg))
            if key not in memo:
                memo[key] = check.problems(cfg)
            answer = memo[key]
        else:
            answer = check.problems(cfg)
        found += [p for p in answer if p not in found]
    return found


def check(cfg: Experiment, resume: bool | int = False, backend: str | None = None) -> Plan:
    """The run's plan, or ``ConfigError`` with every problem (the config's and the run folder's) or
    ``RunFolderInUse`` when only the folder is in the way. Creates nothing."""
    found = problems(cfg, backend)
    in_use = [p for c in seed_trials(cfg) for p in run_folder.problems(c, resume)]
    if found:
        raise ConfigError(found + in_use)
    if in_use:
        raise run_folder.RunFolderInUse(in_use)
    return plan_of(cfg)


@dataclass(frozen=True)
class Run:
    """A prepared run: its config, its plan and its claimed folder (``config.json`` written)."""

    cfg: Experiment
    plan: Plan
    run_dir: Path
    resume: bool = False


def prepare(cfg: Experiment, resume: bool | int = False, backend: str | None = None, checked: bool = False) -> Run:
    """``check`` (skipped when the caller just ran it: ``checked``), then claim the run folder (on resume: cut its
    metrics back to the checkpoint; ``resume`` an int N: from step N, ``--resume-from``), write ``config.json``
    and, where JAX computes in this process (``single``,
    ``threads``), enable the compile cache."""
    backend = backend or backend_of(cfg)
    plan = plan_of(cfg) if checked else check(cfg, resume, backend)
    if cfg.seeds:  # a pack of seeds (``srljax/loops/anakin.py``): each seed's trial is claimed; the pack's folder
        for trial in seed_trials(cfg):  # keeps the pack's config, which ``-f TRIAL --resume`` reads
            write_json(trial, run_folder.claim(trial, resume).absolute() / "config.json")
        run_dir = cfg.run_dir.absolute()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = run_folder.claim(cfg, resume).absolute()
    write_json(cfg, run_dir / "config.json")
    if backend in ("single", "threads"):  # JAX computes in this process (worker processes enable it themselves)
        from srljax.parallel import compile_cache

        compile_cache.enable(cfg.compile_cache)
    return Run(cfg, plan, run_dir, run_folder.resuming(resume))


def joined(cfg: Experiment, run_dir: Path, resume: bool = False) -> Run:
    """The ``Run`` of one process of a group of hosts (``launch/hosts.py``): its folder was claimed and ``config.json``
    written by the launcher (``launch.local``'s ``prepare``, ``launch.slurm``'s submission); only the compile cache."""
    from srljax.parallel import compile_cache

    compile_cache.enable(cfg.compile_cache)
    return Run(cfg, plan_of(cfg), Path(run_dir), resume)


def prepared(cfg: Experiment | Run, resume: bool = False) -> Run:
    """A loop's entry: the ``Run`` a launcher prepared, or ``cfg`` prepared here (a notebook's ``train(cfg)``)."""
    return cfg if isinstance(cfg, Run) else prepare(cfg, resume, "single")


def replay_memory_problems(cfg: Experiment) -> list[str]:
    """A replay that does not fit in this machine's memory, sized with the spec envpool describes for the env (an
    ``env.factory``'s is checked when the replay is built)."""
    if consumes(cfg.algo) != "replay" or not hasattr(cfg.algo, "replay") or cfg.layout.mode != "single":
        return []
    from srljax.replay.buffer import config_memory_problems, extras_bytes, memory_problem, replay_extras

    if config_memory_problems(cfg):
        return []  # an Atari replay: srljax.layout.problems names it, sized from the config
    try:
        spec = envs.described_spec(cfg.env)
    except ValueError:
        return []  # envs.problems names it
    if spec is None:
        return []
    r = cfg.algo.replay
    problem = memory_problem(r.capacity, spec.num_envs, spec.obs_shape, spec.obs_dtype, spec.action_shape,
                             spec.action_dtype, dedup_frames=r.dedup_frames,
                             extra_row_bytes=extras_bytes(replay_extras(cfg.algo, spec)))
    return [problem] if problem else []


def replay_problems(cfg: Experiment) -> list[str]:
    """A replay algorithm's: Ape-X's layout rules (a worker graph), the replay's window and, for Atari, its memory
    from the config (skipped when the capacity itself is wrong: the config's checks name it)."""
    if graph_consumes(cfg) != "replay":
        return []
    from srljax.replay.apex import apex_problems
    from srljax.replay.buffer import config_memory_problems, window_problems

    found = apex_problems(cfg) if cfg.layout.mode != "single" else []
    if not any(p.startswith("algo.replay.capacity") for p in config_problems(cfg)):
        found += window_problems(cfg) or config_memory_problems(cfg)
    return found


def port_problems(cfg: Experiment) -> list[str]:
    """A fixed Prometheus port (``log.prometheus_port`` > 0, single process) that something already listens on:
    found before the run folder exists, so a rerun or ``--resume`` is not blocked by a folder it created."""
    port = cfg.log.prometheus_port
    if not isinstance(port, int) or not 0 < port <= 65535 or cfg.layout.mode != "single":
        return []  # the config's own checks name a port out of range
    import socket

    from srljax.comm.hosts import bind_host

    host = bind_host()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the exporter binds it
        try:
            probe.bind((host, port))
        except OSError as err:
            return [f"log.prometheus_port={port}: cannot listen on {host}:{port} ({err.strerror or err}); stop what "
                    "holds it, or use log.prometheus_port=0 (any free port) or -1 (no endpoint)"]
    return []


# in the order they are reported
def anakin_problems(cfg: Experiment) -> list[str]:
    """What the Anakin loop (a JAX env inside the compiled program, ``srljax/loops/anakin.py``) does not do, and
    ``seeds`` anywhere else."""
    anakin = cfg.layout.mode == "single" and plan_of(cfg).loop == "anakin"
    out = []
    if cfg.seeds_batch > 1 and not cfg.seeds:
        out.append(f"seeds_batch={cfg.seeds_batch} vmaps several of seeds=[...], and this run has one seed; drop it")
    if cfg.seeds and not anakin:
        out.append(f"seeds={list(cfg.seeds)} trains the seeds in one compiled program, which needs a JAX env "
                   "(env.id=gymnax/...) and a segment algorithm in layout.mode=single; run other seeds with "
                   "python -m launch.sweep (seeds=[...] in the sweep file)")
    if not anakin:
        return out
    e, t = cfg.env, cfg.trainer
    if t.batch_envs and t.batch_envs != e.num_envs:
        out.append(f"trainer.batch_envs={t.batch_envs}: on a JAX env every update trains on all env.num_envs="
                   f"{e.num_envs} envs; leave trainer.batch_envs=0")
    shards = t.devices * max(1, t.num_hosts)
    if t.devices >= 1 and e.num_envs % shards:
        over = f"trainer.devices={t.devices}" + (f" x trainer.num_hosts={t.num_hosts}" if t.num_hosts > 1 else "")
        out.append(f"env.num_envs={e.num_envs} does not split over {over}: on a JAX env the envs are sharded over "
                   f"every device of every host; make env.num_envs a multiple of {shards}")
    if t.num_hosts > 1:  # one process per host in a jax.distributed group (launch/hosts.py)
        algo = getattr(cfg.algo, "name", "")
        if consumes(cfg.algo) != "segments":
            out.append(f"trainer.num_hosts={t.num_hosts} with algo={algo}: the Anakin loop over several hosts runs "
                       "segment algorithms (ppo, impala, appo, a user's); use trainer.num_hosts=1 (trainer.devices for "
                       "several devices of one host)")
        if cfg.seeds:
            out.append(f"seeds={list(cfg.seeds)} with trainer.num_hosts={t.num_hosts}: a pack of seeds runs on one "
                       "host; run each seed as its own trial over the hosts (seed=N), or drop trainer.num_hosts")
    if t.overlap_collection:
        out.append("trainer.overlap_collection=true: on a JAX env rollout and update are one compiled program; drop it")
    if cfg.policies.enabled or cfg.selfplay.enabled:
        out.append(f"{'policies' if cfg.policies.enabled else 'selfplay'} on a JAX env: not supported by the Anakin "
                   "loop yet; use an envpool or factory env")
    return out


def search_problems(cfg: Experiment) -> list[str]:
    """A game of several players taking turns needs a search algorithm; a search's bots need an OpenSpiel twin (a
    single-player env's search agent ignores ``selfplay.bots``: ``eval`` evaluates it)."""
    if not cfg.env.is_jax:
        return []
    from envs import jax_envs

    if jax_envs.problems(cfg.env):
        return []  # the env's own message comes from envs.problems
    players, search = jax_envs.players(cfg.env), consumes(cfg.algo) == "search"
    if players > 1 and not search:
        return [f"env.id={cfg.env.id!r} is a game of {players} players taking turns, and algo={cfg.algo.name} learns "
                "one player's rewards: train it with algo=alphazero (configs/connect_four_alphazero.py), or play an "
                "OpenSpiel game by self-play (configs/connect_four_selfplay.py)"]
    if players > getattr(cfg.algo, "max_players", players):
        return [f"algo={cfg.algo.name} on env.id={cfg.env.id!r}, a game of {players} players taking turns: it learns "
                "one player's rewards; train it with algo=alphazero (configs/connect_four_alphazero.py)"]
    if search and players > 1 and cfg.selfplay.bots and cfg.selfplay.bot_games:
        from srljax.selfplay.search_bots import openspiel_game

        try:
            game = openspiel_game(cfg.env.id)
        except ValueError as error:
            return [str(error)]
        return checkpoint_bot.bot_problems(cfg.selfplay.bots, game)
    return []


register("srljax.config", config_problems)  # the config tree and its arithmetic
register("srljax.layout", layout_problems)  # a worker graph's streams and sizes
register("envs.fit", envs.fit_problems)  # the algorithm and agent table against the env, without building it
register("srljax.storage", run_folder.load_problems)  # the checkpoints it loads (load=, policies' load)
register("srljax.replay", replay_problems)
register("srljax.loops.anakin", anakin_problems)
register("srljax.learning.anakin_search", search_problems)
register("srljax.selfplay.checkpoint_bot", checkpoint_bot.selfplay_checkpoint_problems)  # selfplay.bots' ckpt: runs
register("envs", lambda cfg: envs.problems(cfg.env, cfg.algo), key=lambda cfg: repr((cfg.env, cfg.algo)))
register("srljax.replay.memory", replay_memory_problems, ("single",))
register("srljax.telemetry.port", port_problems, ("single",))
