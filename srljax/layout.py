"""The layout graph: which worker roles exist (``ROLES``), how many of each, joined by which streams.

    layout = build_layout(cfg)                  # from cfg.layout and cfg.trainer (mode="distributed")
    layout.count(ACTOR), layout.workers()       # 2, [("trainer", 0), ("policy", 0), ("actor", 0), ...]
    role_spec(cfg, ACTOR).worker                # "srljax.system.acting.actor:ActorWorker"
    problems(cfg)                               # config tree + graph: [] or ["the inference stream ... has no server"]

A role is one file (its ``Worker`` subclass) plus one row of ``ROLES``: its worker class, the
streams it serves (binds), how its process is placed on devices (``srljax/parallel/devices.py``) and
which ``slurm.<group>`` holds its Slurm resources. User-defined roles come from the config
(``layout.custom_roles=("my_pkg.my_module:MyWorker",)``): the class carries its own row as
class attributes (``role``, ``serves``, ``placement``), is configured after the built-in roles
and runs in every backend like them.

One graph, several renderings: threads (``launch/threads.py``), local processes
(``launch/processes.py``) and a Slurm job (``launch/slurm``). Role names are the constants
below; no other module spells them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from srljax.config import Experiment, consumes
from srljax.config.pbt import member_count
from srljax.config.policies import any_remote, inference_of, trainer_count
from srljax.config.selfplay import league_members
from srljax.objects import load_object

TRAINER, BUFFER, POLICY, ACTOR = "trainer", "buffer", "policy", "actor"
EVAL = "eval"  # the eval manager (srljax/system/managers/eval_manager.py), one worker when eval.every_updates > 0
POPULATION = "population"  # the population manager: a distributed PBT population (population_manager.py) or PSRO (psro_manager.py)
LEAGUE = "league"  # the league manager (srljax/system/managers/league_manager.py): a distributed self-play league
CONTROLLER = "controller"
SAMPLES, PARAMS, INFERENCE = "samples", "params", "inference"
PRIORITIES = "priorities"  # replay algorithms: trainer -> the replay buffer worker that drew a batch
DIRECTIVES = "directives"  # a population: manager -> a member's trainer, "copy member j, then use lr x" (PSRO: "next best response")
RESULTS = "results"  # a league: actors -> the league manager, the games' results (opponent, score)
CUSTOM_SLURM_GROUP = "custom"


@dataclass(frozen=True)
class RoleSpec:
    """One row of the roles table."""

    name: str
    worker: str
    """``module:Class`` of its ``Worker`` subclass, imported only by the process that runs it."""
    serves: tuple[str, ...] = ()
    """streams it binds; its clients are configured after it and get the addresses."""
    placement: str = "cpu"
    """``srljax.parallel.devices`` rule for its process: ``trainer``, ``policy``, ``actor`` or ``cpu``."""
    slurm_group: str = CUSTOM_SLURM_GROUP
    """field of ``cfg.slurm`` holding its Slurm resources."""
    count: Callable[[Experiment], int] = lambda cfg: 1
    cpus: Callable[[Experiment], float] = lambda cfg: 1.0
    gpus: Callable[[Experiment], float] = lambda cfg: 0.0
    mem_gb: float = 2.0


ROLES: dict[str, RoleSpec] = {  # in configure order: servers before their clients
    TRAINER: RoleSpec(TRAINER, "srljax.system.training.trainer:TrainerWorker", (SAMPLES, PARAMS), TRAINER, TRAINER,
                      count=lambda cfg: trainer_count(cfg), gpus=lambda cfg: float(cfg.trainer.devices), mem_gb=4.0),
    BUFFER: RoleSpec(BUFFER, "srljax.system.staging.buffer:BufferWorker", (SAMPLES,), "cpu", BUFFER,
                     count=lambda cfg: cfg.layout.num_buffer_workers, mem_gb=4.0),
    POLICY: RoleSpec(POLICY, "srljax.system.acting.policy:PolicyWorker", (INFERENCE,), POLICY, POLICY,
                     count=lambda cfg: cfg.layout.num_policy_workers if any_remote(cfg) else 0),
    LEAGUE: RoleSpec(LEAGUE, "srljax.system.managers.league_manager:LeagueManager", (RESULTS,), "cpu", EVAL,
                     count=lambda cfg: 1 if cfg.layout.mode == "distributed" and league_members(cfg) else 0),
    ACTOR: RoleSpec(ACTOR, "srljax.system.acting.actor:ActorWorker", (), ACTOR, ACTOR,
                    count=lambda cfg: cfg.layout.num_actors, cpus=lambda cfg: float(cfg.env.num_threads or 1)),
    EVAL: RoleSpec(EVAL, "srljax.system.managers.eval_manager:EvalManager", (), "cpu", EVAL,
                   count=lambda cfg: 1 if cfg.eval.every_updates > 0 else 0),
    POPULATION: RoleSpec(POPULATION, "srljax.system.managers.population_manager:PopulationManager", (), "cpu", EVAL,
                         count=lambda cfg: 1 if cfg.pbt.enabled or cfg.psro.enabled else 0),
}

PSRO_MANAGER = "srljax.system.managers.psro_manager:PSROManager"  # the population role when ``psro.enabled``


REPLAY_WORKERS: dict[str, str] = {  # a replay algorithm (Ape-X): the same roles, replay-aware actors and buffers
    ACTOR: "srljax.system.acting.apex_actor:ApexActorWorker",
    BUFFER: "srljax.system.staging.replay_buffer:ReplayBufferWorker",
}


SEARCH_WORKERS: dict[str, str] = {  # MuZero in the worker graph: the buffers keep its replay and reanalyse
    BUFFER: "srljax.system.staging.search_buffer:SearchBufferWorker",
}


def parse_custom(entry: str) -> tuple[str, int]:
    """``"pkg.mod:Class*2"`` -> ("pkg.mod:Class", 2); the count defaults to 1."""
    path, _, count = entry.partition("*")
    try:
        return path.strip(), int(count) if count else 1
    except ValueError:
        raise ValueError(f"layout.custom_roles entry {entry!r}: the count after '*' must be an integer") from None


def custom_roles(cfg: Experiment) -> dict[str, RoleSpec]:
    """The user-defined roles of ``cfg`` as rows of the table (imports each worker class)."""
    out: dict[str, RoleSpec] = {}
    for entry in cfg.layout.custom_roles:
        path, count = parse_custom(entry)
        cls = load_object(path, "layout.custom_roles entry")
        name = getattr(cls, "role", "")
        if not isinstance(cls, type) or not name or not hasattr(cls, "poll"):
            raise ValueError(f"layout.custom_roles entry {entry!r} is not a Worker subclass with a `role` name "
                             "(see srljax/system/shell/worker.py)")
        if name in ROLES or name in out or name in (CONTROLLER, "relay"):  # relay: srljax/comm/control.py
            raise ValueError(f"layout.custom_roles entry {entry!r}: role name {name!r} is already taken")
        out[name] = RoleSpec(name, path, tuple(getattr(cls, "serves", ())), getattr(cls, "placement", "cpu"),
                             CUSTOM_SLURM_GROUP, count=lambda cfg, n=count: n)
    return out


def all_roles(cfg: Experiment) -> dict[str, RoleSpec]:
    """Built-in and custom rows, in configure order."""
    return {**ROLES, **custom_roles(cfg)}


def role_spec(cfg: Experiment, role: str) -> RoleSpec:
    roles = all_roles(cfg)
    if role not in roles:
        raise ValueError(f"unknown worker role {role!r}; this layout has {', '.join(roles)}")
    return roles[role]


def graph_consumes(cfg: Experiment) -> str:
    """What the run trains on as its plan sees it: ``consumes(cfg.algo)``, except that in a worker graph value
    decomposition's sequences (``sequences``) are sampled by Ape-X's replay buffer workers: ``replay``."""
    kind = consumes(cfg.algo)
    return "replay" if kind == "sequences" and cfg.layout.mode == "distributed" else kind


def worker_path(cfg: Experiment, role: str) -> str:
    """``module:Class`` of the worker that runs ``role`` in this run (the plan's choice, see ``plan_of``). The trainer
    is one ``TrainerWorker`` for every run: it picks its parts (a member's, a policy's, Ape-X's replay source) from
    its plan (``srljax.system.training.parts``)."""
    if graph_consumes(cfg) == "replay" and role in REPLAY_WORKERS:
        return REPLAY_WORKERS[role]
    if consumes(cfg.algo) == "search" and role in SEARCH_WORKERS:
        return SEARCH_WORKERS[role]
    if role == POPULATION and cfg.psro.enabled:
        return PSRO_MANAGER
    return role_spec(cfg, role).worker


def worker_class(cfg: Experiment, role: str) -> type:
    """The ``Worker`` subclass that runs ``role`` (imported now)."""
    return load_object(worker_path(cfg, role), f"the {role} worker class")


@dataclass(frozen=True)
class WorkerGroup:
    """``count`` identical workers of one role; resources are per worker (what a scheduler reserves)."""

    role: str
    count: int
    cpus: float = 1.0
    gpus: float = 0.0
    mem_gb: float = 2.0


@dataclass(frozen=True)
class Stream:
    """Data flowing from ``src`` to ``dst`` (for ``inference``: requests; replies go back)."""

    kind: str
    src: str
    dst: str


@dataclass(frozen=True)
class Layout:
    groups: tuple[WorkerGroup, ...]
    streams: tuple[Stream, ...]

    def count(self, role: str) -> int:
        return sum(g.count for g in self.groups if g.role == role)

    @property
    def order(self) -> tuple[str, ...]:
        """Roles in configure order (servers before clients)."""
        return tuple(g.role for g in self.groups)

    def workers(self) -> list[tuple[str, int]]:
        """Every ``(role, index)``, in configure order (servers first)."""
        return [(g.role, i) for g in self.groups for i in range(g.count)]

    def inputs(self, role: str, kind: str) -> list[Stream]:
        return [s for s in self.streams if s.dst == role and s.kind == kind]

    def outputs(self, role: str, kind: str) -> list[Stream]:
        return [s for s in self.streams if s.src == role and s.kind == kind]

    def sample_sink(self) -> str:
        """Where actors push samples: the buffers if there are any, else the trainers."""
        (stream,) = self.outputs(ACTOR, SAMPLES)
        return stream.dst


def build_layout(cfg: Experiment) -> Layout:
    """The worker graph ``cfg`` describes (groups with a zero count are kept, so checks can name them)."""
    groups = tuple(WorkerGroup(r.name, r.count(cfg), r.cpus(cfg), r.gpus(cfg), r.mem_gb) for r in all_roles(cfg).values())
    per = inference_of(cfg)  # several policies: each its own inference, both kinds in one run
    remote = any_remote(cfg)
    inline = "inline" in per.values() if per else not remote
    sink = BUFFER if cfg.layout.num_buffer_workers > 0 else TRAINER
    streams = [Stream(SAMPLES, ACTOR, sink)]
    if sink == BUFFER:
        streams.append(Stream(SAMPLES, BUFFER, TRAINER))
    if sink == BUFFER and graph_consumes(cfg) == "replay":
        streams.append(Stream(PRIORITIES, TRAINER, BUFFER))
    if sink == BUFFER and consumes(cfg.algo) == "search":  # MuZero's buffers reanalyse with the newest params
        streams.append(Stream(PARAMS, TRAINER, BUFFER))
    if remote:
        streams += [Stream(INFERENCE, ACTOR, POLICY), Stream(PARAMS, TRAINER, POLICY)]
    if inline:  # actors that act a policy themselves follow its params
        streams.append(Stream(PARAMS, TRAINER, ACTOR))
    if cfg.eval.every_updates > 0:
        streams.append(Stream(PARAMS, TRAINER, EVAL))
    if cfg.pbt.enabled or cfg.psro.enabled:  # the manager follows every member's params and tells a member's
        # trainer to copy another (PSRO: the one trainer's, and when to start the next best response)
        streams += [Stream(PARAMS, TRAINER, POPULATION), Stream(DIRECTIVES, POPULATION, TRAINER)]
    if league_members(cfg):  # the manager follows every member's params (its snapshots) and the actors' games
        streams += [Stream(PARAMS, TRAINER, LEAGUE), Stream(RESULTS, ACTOR, LEAGUE)]
    return Layout(groups=groups, streams=tuple(streams))


ANAKIN_REPLAY = ("dqn", "sac", "td3")
"""Replay algorithms the Anakin loop runs with its on-device replay of transitions (R2D2's sequences: not yet)."""


@dataclass(frozen=True)
class Plan:
    """What a run is, decided once from a config (``plan_of``): launchers, loops and workers read this instead of
    testing the config's feature switches again."""

    mode: str
    """``single`` (one process, ``srljax/loops/``) or ``distributed`` (a worker graph, ``srljax/system/``)."""
    consumes: str
    """what the update trains on: ``segments`` (PPO, IMPALA, ...), ``replay`` (DQN, R2D2, SAC, TD3), ``search``
    (AlphaZero, MuZero: rows chosen by a tree search; MuZero also in the worker graph, ``SEARCH_WORKERS``) or
    ``sequences`` (QMIX, VDN: a replay of sequences on the device, the Anakin loop; in a worker graph their sequences
    come from Ape-X's replay buffer workers, and the plan says ``replay``: ``graph_consumes``)."""
    loop: str
    """the single-process loop that runs it: ``on_policy``, ``replay``, ``population``, ``league``, ``psro`` or ``anakin`` (a
    JAX env stepped inside the compiled program, ``srljax/loops/anakin.py``)."""
    members: int
    """members trained side by side (a PBT population's or a league's), each with its own trainer; 0 for one."""
    pbt: bool
    """a PBT population: a population manager exploits and explores among the members."""
    league: int
    """members of a self-play league (0: none): a league manager, the actors' game results."""
    policies: tuple[str, ...]
    """the policies that train when there are several (one trainer each); () for one policy."""
    selfplay: bool
    """the env's opponent is drawn from snapshots of the learner (``selfplay``; a league too)."""
    remote: bool
    """inference at policy workers (``layout.inference=remote``, or any policy's ``inference=remote``) rather than
    inline in the actors (only)."""
    inference: dict[str, str]
    """several policies: each policy's inference, ``inline`` (the actors act it) or ``remote`` (the policy workers
    serve it); both kinds may mix in one run. {} for one policy."""
    layout: Layout
    """every role with its count and the streams between them (distributed runs)."""
    workers: dict[str, str]
    """role -> ``module:Class`` of the worker that runs it."""
    psro: bool = False
    """PSRO as a worker graph: the population manager's meta-game, one trainer training the best responses in turn,
    actors drawing their opponents from the meta-strategy (``srljax/system/managers/psro_manager.py``)."""

    @property
    def replay(self) -> bool:
        return self.consumes == "replay"

    def served(self, how: str) -> tuple[str, ...]:
        """The policies (several) whose inference is ``how`` (``inline`` or ``remote``), in ``named`` order."""
        return tuple(name for name, h in self.inference.items() if h == how)


def plan_of(cfg: Experiment) -> Plan:
    """The run's plan: its mode, its loop or roles (with counts, workers and streams). Pure; imports a custom role's
    class only to read its row."""
    kind = graph_consumes(cfg)
    members, league = member_count(cfg), league_members(cfg)
    if cfg.pbt.enabled:
        loop = "population"
    elif league:
        loop = "league"
    elif cfg.psro.enabled:
        loop = "psro"
    elif cfg.env.is_jax and (kind in ("segments", "search", "sequences") or getattr(cfg.algo, "name", "") in ANAKIN_REPLAY):
        loop = "anakin"
    else:
        loop = "replay" if kind == "replay" else "on_policy"
    layout = build_layout(cfg)
    return Plan(mode=cfg.layout.mode, consumes=kind, loop=loop, members=members, pbt=cfg.pbt.enabled, league=league,
                policies=cfg.policies.training() if cfg.policies.enabled else (), selfplay=cfg.selfplay.enabled,
                remote=any_remote(cfg), inference=inference_of(cfg) if cfg.policies.enabled else {}, layout=layout,
                workers={g.role: worker_path(cfg, g.role) for g in layout.groups},
                psro=cfg.psro.enabled and cfg.layout.mode == "distributed")


def graph_problems(layout: Layout) -> list[str]:
    """Streams whose ends do not connect, each naming the stream and the fix."""
    out: list[str] = []
    for s in layout.streams:
        # a publisher nobody subscribes to is harmless; a sender with nowhere to send is not
        if s.kind != PARAMS and layout.count(s.src) and not layout.count(s.dst):
            what = "server" if s.kind == INFERENCE else "receiver"
            out.append(f"the {s.kind} stream {s.src} -> {s.dst} has no {what}: there are 0 {s.dst} workers{_fix(s.dst)}")
    if layout.count(TRAINER) < 1:
        out.append("the layout has no trainer: set trainer.num_hosts>=1")
    if layout.count(TRAINER) and not any(layout.count(s.src) for s in layout.inputs(TRAINER, SAMPLES)):
        out.append("the trainer has no sample source: no actor or buffer group sends it samples "
                   f"(actors: {layout.count(ACTOR)}, buffers: {layout.count(BUFFER)}); set layout.num_actors>=1")
    # whoever runs the policy needs params: policy workers, and actors that act inline
    for role in (ACTOR, POLICY):
        acts = role == POLICY or not layout.outputs(role, INFERENCE)
        if layout.count(role) and acts and not any(layout.count(s.src) for s in layout.inputs(role, PARAMS)):
            out.append(f"the {role} workers have no params source (no trainer publishes to them)")
    return out


def _fix(role: str) -> str:
    return {
        POLICY: "; set layout.num_policy_workers>=1 or layout.inference=inline (and no policy's inference=remote)",
        ACTOR: "; set layout.num_actors>=1",
        BUFFER: "; set layout.num_buffer_workers>=1 or 0 to send samples straight to the trainer",
    }.get(role, "")


def layout_problems(cfg: Experiment) -> list[str]:
    """Every problem with a distributed layout (graph and sizes); for ``layout.mode=single``, only a distributed
    layout's key set."""
    if cfg.layout.shared_memory:
        if cfg.layout.mode != "distributed":
            return ["layout.shared_memory=true moves a distributed layout's samples through shared memory, and "
                    "layout.mode=single has no sample stream: drop it, or set layout.mode=distributed"]
        from srljax.comm.shm import available

        if why := available():
            return [f"layout.shared_memory=true cannot work here: {why}; set layout.shared_memory=false"]
    if cfg.layout.mode != "distributed":
        return []
    lay, env = cfg.layout, cfg.env
    try:
        layout = build_layout(cfg)
    except ValueError as error:  # a custom role that does not import
        return [str(error)]
    out = graph_problems(layout)
    if lay.ring_size >= 1 and env.num_envs % lay.ring_size:
        out.append(f"env.num_envs={env.num_envs} is not a multiple of layout.ring_size={lay.ring_size} "
                   f"({env.num_envs} % {lay.ring_size} = {env.num_envs % lay.ring_size}); each ring slot steps "
                   "an equal batch of envs")
    elif lay.ring_size > 1 and env.batch_size and env.batch_size * lay.ring_size != env.num_envs:
        out.append(f"env.batch_size={env.batch_size} x layout.ring_size={lay.ring_size} != env.num_envs={env.num_envs}; "
                   "set env.batch_size=0 to derive it from the ring size")
    return out


def describe_batch(cfg: Experiment) -> str:
    """One line with the training batch and where its columns come from (launchers print it at start)."""
    if callable(getattr(cfg.algo, "describe_batch", None)):  # a replay algorithm: sampled batches, not segments
        return cfg.algo.describe_batch(cfg)
    batch = f"batch {cfg.batch_envs} env columns x {cfg.algo.num_steps} steps = {cfg.env_steps_per_update:,} samples per update"
    if cfg.layout.mode != "distributed":
        hosts = cfg.trainer.num_hosts  # an Anakin run over several processes (launch/hosts.py)
        where = (f"{cfg.env.num_envs} envs over {hosts} processes, {cfg.env.num_envs // hosts} each" if hosts > 1
                 else f"{cfg.env.num_envs} envs in this process")
        return f"{batch} ({where}), {cfg.num_updates:,} updates"
    members = member_count(cfg)
    if members:  # a population or a league: every member trains such batches
        return (f"{batch} per member; {members} members, each with its own trainer and "
                f"{cfg.layout.num_actors // members} actor(s) x {cfg.env.num_envs} envs, "
                f"{cfg.num_updates:,} updates each")
    hosts = cfg.trainer.num_hosts
    split = f", {cfg.batch_envs // hosts} columns from each of {hosts} trainer processes" if hosts > 1 else ""
    if cfg.psro.enabled:  # one trainer, the best responses in turn (srljax/system/training/psro_trainer.py)
        from srljax.config.psro import GraphSchedule

        s = GraphSchedule.of(cfg)
        return (f"{batch} (trainer.batch_envs); collected by {cfg.layout.num_actors} actors x {cfg.env.num_envs} envs; "
                f"PSRO: {s.iterations} best responses of {s.updates:,} updates (params versions 0..{s.last:,})")
    return (f"{batch} (trainer.batch_envs{split}); collected by {cfg.layout.num_actors} actors x {cfg.env.num_envs} "
            f"envs, {cfg.num_updates:,} updates")


def actor_envs_per_recv(cfg: Experiment) -> int:
    """Envs one actor gets per ``recv``: ``env.batch_size`` if set, else ``env.num_envs / layout.ring_size``."""
    return cfg.env.batch_size or max(1, cfg.env.num_envs // max(1, cfg.layout.ring_size))


def segments_ahead(cfg: Experiment) -> int:
    """How many segments an actor may push beyond its share of the batches trained so far.

    ``layout.max_segments_ahead``, or by default its share of ``publish_every + 1`` batches (at
    least one segment): the actor collects the next batch while the trainer updates, and no more
    (more would only go stale in socket buffers and be dropped).
    """
    if cfg.layout.max_segments_ahead:
        return cfg.layout.max_segments_ahead
    return max(1, math.ceil(columns_per_version(cfg) * (cfg.trainer.publish_every + 1) / cfg.env.num_envs))


def columns_per_version(cfg: Experiment) -> float:
    """One actor's share of a training batch, in env columns: ``batch_envs / num_actors`` (a population or a
    league: ``batch_envs`` over the actors of one member)."""
    members = member_count(cfg) or 1
    return cfg.batch_envs / max(1, cfg.layout.num_actors // members)
