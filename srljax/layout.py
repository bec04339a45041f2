"""The layout graph: which worker groups exist, how many, with what resources, joined by which streams.

    layout = build_layout(cfg)                  # from cfg.layout (mode="distributed")
    layout.count("actor"), layout.workers()     # 2, [("trainer", 0), ("policy", 0), ("actor", 0), ...]
    layout_problems(cfg)                        # [] or ["actor -> policy inference stream has no server ..."]

One graph, several renderings: ``srljax.system.threads.run_threads`` (all workers as threads in
this process, for tests and notebooks), ``python -m launch.local CFG.py`` (one process per
worker, ``launch/processes.py``) and a Slurm job (``launch/slurm.py``). Streams name a kind and the roles at
their two ends; ``src`` sends (client of an inference stream), ``dst`` receives (its server).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from srljax.config import Experiment

Role = Literal["trainer", "buffer", "policy", "actor"]
StreamKind = Literal["samples", "params", "inference"]

CONFIGURE_ORDER: tuple[Role, ...] = ("trainer", "buffer", "policy", "actor")
"""Servers before their clients: a worker binds in ``setup`` and its clients connect in theirs."""


@dataclass(frozen=True)
class WorkerGroup:
    """``count`` identical workers of one role; resources are per worker (what a scheduler reserves)."""

    role: Role
    count: int
    cpus: float = 1.0
    gpus: float = 0.0
    mem_gb: float = 2.0


@dataclass(frozen=True)
class Stream:
    """Data flowing from ``src`` to ``dst`` (for ``inference``: requests; replies go back)."""

    kind: StreamKind
    src: Role
    dst: Role


@dataclass(frozen=True)
class Layout:
    groups: tuple[WorkerGroup, ...]
    streams: tuple[Stream, ...]

    def count(self, role: str) -> int:
        return sum(g.count for g in self.groups if g.role == role)

    def workers(self) -> list[tuple[Role, int]]:
        """Every ``(role, index)``, in configure order (servers first)."""
        return [(role, i) for role in CONFIGURE_ORDER for i in range(self.count(role))]

    def inputs(self, role: str, kind: str) -> list[Stream]:
        return [s for s in self.streams if s.dst == role and s.kind == kind]

    def outputs(self, role: str, kind: str) -> list[Stream]:
        return [s for s in self.streams if s.src == role and s.kind == kind]

    def sample_sink(self) -> Role:
        """Where actors push samples: the buffers if there are any, else the trainer."""
        (stream,) = self.outputs("actor", "samples")
        return stream.dst


def build_layout(cfg: Experiment) -> Layout:
    """The worker graph ``cfg.layout`` describes (groups with a zero count are kept, so checks can name them)."""
    lay, env = cfg.layout, cfg.env
    remote = lay.inference == "remote"
    actor_cpus = float(env.num_threads or 1)
    groups = (
        WorkerGroup("trainer", 1, cpus=1.0, gpus=float(cfg.trainer.devices), mem_gb=4.0),
        WorkerGroup("buffer", lay.num_buffer_workers, cpus=1.0, mem_gb=4.0),
        WorkerGroup("policy", lay.num_policy_workers if remote else 0, cpus=1.0, gpus=0.0),
        WorkerGroup("actor", lay.num_actors, cpus=actor_cpus),
    )
    sink: Role = "buffer" if lay.num_buffer_workers > 0 else "trainer"
    streams = [Stream("samples", "actor", sink)]
    if sink == "buffer":
        streams.append(Stream("samples", "buffer", "trainer"))
    if remote:
        streams += [Stream("inference", "actor", "policy"), Stream("params", "trainer", "policy")]
    else:
        streams.append(Stream("params", "trainer", "actor"))
    return Layout(groups=groups, streams=tuple(streams))


def graph_problems(layout: Layout) -> list[str]:
    """Streams whose ends do not connect, each naming the stream and the fix."""
    out: list[str] = []
    for s in layout.streams:
        # a publisher nobody subscribes to is harmless; a sender with nowhere to send is not
        if s.kind != "params" and layout.count(s.src) and not layout.count(s.dst):
            what = "server" if s.kind == "inference" else "receiver"
            out.append(f"the {s.kind} stream {s.src} -> {s.dst} has no {what}: there are 0 {s.dst} workers{_fix(s.dst)}")
    if layout.count("trainer") != 1:
        out.append(f"exactly one trainer worker is supported, layout has {layout.count('trainer')}")
    if layout.count("trainer") and not any(layout.count(s.src) for s in layout.inputs("trainer", "samples")):
        out.append("the trainer has no sample source: no actor or buffer group sends it samples "
                   f"(actors: {layout.count('actor')}, buffers: {layout.count('buffer')}); set layout.num_actors>=1")
    # whoever runs the policy needs params: policy workers, and actors that act inline
    for role in ("actor", "policy"):
        acts = role == "policy" or not layout.outputs(role, "inference")
        if layout.count(role) and acts and not any(layout.count(s.src) for s in layout.inputs(role, "params")):
            out.append(f"the {role} workers have no params source (no trainer publishes to them)")
    return out


def _fix(role: str) -> str:
    return {
        "policy": "; set layout.num_policy_workers>=1 or layout.inference=inline",
        "actor": "; set layout.num_actors>=1",
        "buffer": "; set layout.num_buffer_workers>=1 or 0 to send samples straight to the trainer",
    }.get(role, "")


def layout_problems(cfg: Experiment) -> list[str]:
    """Every problem with a distributed layout (graph and sizes); [] for ``layout.mode=single``."""
    if cfg.layout.mode != "distributed":
        return []
    lay, env = cfg.layout, cfg.env
    out = graph_problems(build_layout(cfg))
    if lay.ring_size >= 1 and env.num_envs % lay.ring_size:
        out.append(f"env.num_envs={env.num_envs} is not a multiple of layout.ring_size={lay.ring_size} "
                   f"({env.num_envs} % {lay.ring_size} = {env.num_envs % lay.ring_size}); each ring slot steps "
                   "an equal batch of envs")
    elif lay.ring_size > 1 and env.batch_size and env.batch_size * lay.ring_size != env.num_envs:
        out.append(f"env.batch_size={env.batch_size} x layout.ring_size={lay.ring_size} != env.num_envs={env.num_envs}; "
                   "set env.batch_size=0 to derive it from the ring size")
    if lay.num_buffer_workers < 0 or lay.num_policy_workers < 0:
        out.append("layout.num_buffer_workers and layout.num_policy_workers must be >= 0")
    if lay.heartbeat_timeout_seconds <= 0:
        out.append(f"layout.heartbeat_timeout_seconds={lay.heartbeat_timeout_seconds} must be > 0")
    if cfg.trainer.max_policy_lag < 0:
        out.append(f"trainer.max_policy_lag={cfg.trainer.max_policy_lag} must be >= 0")
    return out


def actor_envs_per_recv(cfg: Experiment) -> int:
    """Envs one actor gets per ``recv``: ``env.batch_size`` if set, else ``env.num_envs / layout.ring_size``."""
    return cfg.env.batch_size or max(1, cfg.env.num_envs // max(1, cfg.layout.ring_size))
