"""The layout graph as the components of one heterogeneous Slurm job, and what is wrong with it.

    comps = plan(cfg)               # [Component(0, groups=(trainer x1, policy x1)), Component(1, (actor x2,))]
    comps[0].options                # ("--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--mem-per-cpu=3072M")
    slurm_problems(cfg)             # [] or ["slurm.trainer.gpus_per_task=16 but its nodes have 8 GPUs ..."]

One component per worker group, so every group gets exactly its per-task resources, partition,
account, QOS and constraint (CPU nodes for actors, GPU nodes for the trainer). Slurm never puts
two components of one het job on the same node, so small groups can join another group's
component (``slurm.policy.component=trainer``): that component is one node holding the sum of
its groups, and each group's ``srun --exact`` step takes its own share. Component 0 holds the
trainer; the batch script, and with it the controller, runs on its first node.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from srljax.config import Experiment, SlurmGroup
from srljax.layout import CONFIGURE_ORDER, build_layout

# Slurm --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
TIME_RE = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^\d+-\d+$")
SIGNAL_MAX_S = 65535  # Slurm's limit for --signal=...@N


@dataclass(frozen=True)
class GroupPlan:
    """One worker group's Slurm tasks: ``count`` tasks of ``cpus`` CPUs, ``gpus`` GPUs, ``mem_mb`` MB each."""

    role: str
    count: int
    cpus: int
    gpus: int
    mem_mb: int
    offset: int = 0  # index of the group's first worker within its role

    @property
    def mem_per_cpu_mb(self) -> int:
        return math.ceil(self.mem_mb / self.cpus)

    def step_options(self) -> list[str]:
        """``srun`` options of this group's step: its exact share of the component."""
        out = ["--exact", f"--ntasks={self.count}", f"--cpus-per-task={self.cpus}", f"--mem-per-cpu={self.mem_per_cpu_mb}M"]
        return out + ([f"--gpus-per-task={self.gpus}"] if self.gpus else [])


@dataclass(frozen=True)
class Component:
    """One het-job component: its groups and its ``#SBATCH`` options."""

    index: int
    groups: tuple[GroupPlan, ...]
    options: tuple[str, ...]
    partition: str = ""  # "": the cluster's default
    nodes: int = 1  # at least this many nodes

    @property
    def packed(self) -> bool:
        return len(self.groups) > 1

    def describe(self) -> str:
        return " + ".join(f"{g.role} x{g.count}" for g in self.groups)


def group_config(cfg: Experiment, role: str) -> SlurmGroup:
    return getattr(cfg.slurm, role)


def setting(cfg: Experiment, role: str, key: str) -> str:
    """A group's partition/account/qos/constraint, else the job-wide one."""
    return getattr(group_config(cfg, role), key) or getattr(cfg.slurm, key)


def node_size(cfg: Experiment, role: str) -> tuple[int, int, float]:
    """``(cpus, gpus, mem_gb)`` of the nodes ``role`` runs on as the config states them (0, -1, 0: unknown)."""
    g, s = group_config(cfg, role), cfg.slurm
    return (g.node_cpus or s.node_cpus, g.node_gpus if g.node_gpus >= 0 else s.node_gpus, g.node_mem_gb or s.node_mem_gb)


def group_plans(cfg: Experiment) -> list[GroupPlan]:
    """Every non-empty group with its per-task resources resolved (config over the layout's estimate)."""
    out = []
    for group in build_layout(cfg).groups:
        if group.count < 1:
            continue
        sg = group_config(cfg, group.role)
        cpus = sg.cpus_per_task or max(1, math.ceil(group.cpus))
        mem_gb = sg.mem_gb_per_task or group.mem_gb
        out.append(GroupPlan(group.role, group.count, cpus, sg.gpus_per_task, math.ceil(mem_gb * 1024)))
    return sorted(out, key=lambda g: CONFIGURE_ORDER.index(g.role))  # type: ignore[arg-type]


def home(cfg: Experiment, role: str) -> str:
    """The role whose component ``role`` runs in (itself unless packed)."""
    return group_config(cfg, role).component or role


def plan(cfg: Experiment) -> list[Component]:
    """The het-job components, the trainer's first. Call ``slurm_problems`` first: this assumes a sane config."""
    groups = group_plans(cfg)
    roots = [g.role for g in groups if home(cfg, g.role) == g.role]
    comps = []
    for index, root in enumerate(roots):
        members = tuple(g for g in groups if home(cfg, g.role) == root)
        nodes = group_config(cfg, root).nodes if len(members) == 1 else 1
        comps.append(Component(index, members, tuple(_options(cfg, root, members)), setting(cfg, root, "partition"),
                               max(1, nodes)))
    return comps


def _options(cfg: Experiment, root: str, members: tuple[GroupPlan, ...]) -> list[str]:
    sg = group_config(cfg, root)
    if len(members) == 1:
        (g,) = members
        out = [f"--ntasks={g.count}", f"--cpus-per-task={g.cpus}", f"--mem-per-cpu={g.mem_per_cpu_mb}M"]
        out += [f"--gpus-per-task={g.gpus}"] if g.gpus else []
        out = ([f"--nodes={sg.nodes}"] if sg.nodes else []) + out
    else:  # one node holding the sum; each group's step takes its share with srun --exact
        cpus = sum(g.count * g.cpus for g in members)
        gpus = sum(g.count * g.gpus for g in members)
        mem = sum(g.count * g.mem_mb for g in members)
        out = ["--nodes=1", "--ntasks=1", f"--cpus-per-task={cpus}", f"--mem-per-cpu={math.ceil(mem / cpus)}M"]
        out += [f"--gpus-per-task={gpus}"] if gpus else []
    for key in ("partition", "account", "qos", "constraint"):
        if value := setting(cfg, root, key):
            out.append(f"--{key}={value}")
    return out + list(sg.sbatch)


def time_limit(cfg: Experiment) -> str:
    """``slurm.time_limit``, else ``timeout_seconds`` rounded up to whole minutes as ``D-HH:MM:SS``."""
    if cfg.slurm.time_limit:
        return cfg.slurm.time_limit
    minutes = math.ceil(cfg.timeout_seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def time_limit_seconds(text: str) -> int | None:
    """Seconds in a Slurm time string (``3-00:00:00``, ``90``, ``1:30:00``); None if it is not one."""
    if not TIME_RE.match(text):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        h, m, s = (parts + [0, 0])[:3]
    else:  # M, M:S, H:M:S
        h, m, s = [0, *parts, 0][:3] if len(parts) < 3 else parts
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def slurm_problems(cfg: Experiment) -> list[str]:
    """Everything ``launch.slurm`` cannot submit, each naming the key, the numbers and the fix."""
    if cfg.layout.mode != "distributed":
        return [("layout.mode=single trains in one process: run it with python -m launch.local, "
                 "or set layout.mode=distributed to launch the worker graph on Slurm")]
    out: list[str] = []
    if cfg.layout.transport != "tcp":
        out.append("layout.transport=ipc only reaches workers on one node; launch.slurm needs layout.transport=tcp")
    if cfg.trainer.num_hosts != 1:
        out.append(f"trainer.num_hosts={cfg.trainer.num_hosts}: launch.slurm starts one trainer process; "
                   "multi-host trainers (jax.distributed) are not launched on Slurm yet")
    limit, signal_s = time_limit(cfg), cfg.slurm.signal_seconds
    seconds = time_limit_seconds(limit)
    if seconds is None:
        out.append(f"slurm.time_limit={limit!r} is not a Slurm time (e.g. 3-00:00:00, 12:00:00 or 90 minutes)")
    elif not 0 < signal_s < seconds:
        out.append(f"slurm.signal_seconds={signal_s} must be > 0 and below the time limit {limit} ({seconds} s)")
    if signal_s > SIGNAL_MAX_S:
        out.append(f"slurm.signal_seconds={signal_s} is above Slurm's limit of {SIGNAL_MAX_S}")
    groups = {g.role: g for g in group_plans(cfg)}
    for role in CONFIGURE_ORDER:
        out += _group_problems(cfg, role, groups)
    unfit = set()
    for g in groups.values():
        what = f"one {g.role} task (slurm.{g.role}: {g.cpus} CPUs, {g.gpus} GPUs, {g.mem_mb / 1024:g} GB)"
        on = home(cfg, g.role) if home(cfg, g.role) in groups else g.role  # a packed group runs on its root's nodes
        if found := _fit_problems(cfg, on, f"slurm.{on}", g.cpus, g.gpus, g.mem_mb, what):
            out += found
            unfit.add(g.role)
    for root in {home(cfg, r) for r in groups if home(cfg, r) != r and home(cfg, r) in groups}:
        members = [g for g in groups.values() if home(cfg, g.role) == root]
        if unfit & {g.role for g in members}:
            continue  # already reported per task
        what = f"component {' + '.join(f'{g.role} x{g.count}' for g in members)} (one node)"
        out += _fit_problems(cfg, root, f"slurm.{root}", sum(g.count * g.cpus for g in members),
                             sum(g.count * g.gpus for g in members), sum(g.count * g.mem_mb for g in members), what)
    trainer = groups.get("trainer")
    if trainer and trainer.gpus and cfg.trainer.devices > trainer.gpus:
        out.append(f"trainer.devices={cfg.trainer.devices} but slurm.trainer.gpus_per_task={trainer.gpus}: "
                   "the trainer would see too few GPUs; ask for as many GPUs as devices")
    for role, choice in (("policy", cfg.layout.policy_device), ("actor", cfg.layout.actor_device)):
        if choice == "gpu" and role in groups and not groups[role].gpus:
            out.append(f"layout.{role}_device=gpu but slurm.{role}.gpus_per_task=0: its tasks would see no GPU")
    return out


def _group_problems(cfg: Experiment, role: str, groups: dict[str, GroupPlan]) -> list[str]:
    sg, key, out = group_config(cfg, role), f"slurm.{role}", []
    for name in ("cpus_per_task", "gpus_per_task", "mem_gb_per_task", "nodes"):
        if getattr(sg, name) < 0:
            out.append(f"{key}.{name}={getattr(sg, name)} must be >= 0 (0: the default)")
    if role in groups and sg.nodes > groups[role].count:
        out.append(f"{key}.nodes={sg.nodes} is more than its {groups[role].count} tasks")
    target = sg.component
    if not target or target == role:
        return out
    if target not in CONFIGURE_ORDER:
        return out + [f"{key}.component={target!r} is not a worker group; use one of {', '.join(CONFIGURE_ORDER)}"]
    if role not in groups:
        return out
    if target not in groups:
        out.append(f"{key}.component={target}: there are no {target} workers whose node it could share")
    elif home(cfg, target) != target:
        out.append(f"{key}.component={target}, but {target} itself runs in {home(cfg, target)}'s component; "
                   f"set {key}.component={home(cfg, target)}")
    if sg.nodes:
        out.append(f"{key}.nodes={sg.nodes}: a packed group runs on its component's one node; set it to 0")
    if sg.sbatch:
        out.append(f"{key}.sbatch: a packed group has no component of its own; put the options in "
                   f"slurm.{target}.sbatch")
    for name in ("partition", "account", "qos", "constraint"):
        mine, theirs = getattr(sg, name), setting(cfg, target, name)
        if mine and mine != theirs:
            out.append(f"{key}.{name}={mine!r} differs from its component's ({target}: {theirs or 'default'!r}); "
                       "groups sharing a component share its partition, account, QOS and constraint")
    return out


def _fit_problems(cfg: Experiment, role: str, key: str, cpus: int, gpus: int, mem_mb: int, what: str) -> list[str]:
    node_cpus, node_gpus, node_mem_gb = node_size(cfg, role)
    g = group_config(cfg, role)

    def source(name: str, unset: float) -> str:  # which key stated the node size
        return f"{key}.{name}" if getattr(g, name) != unset else f"slurm.{name}"

    out = []
    if node_gpus >= 0 and gpus > node_gpus:
        out.append(f"{what} needs {gpus} GPU(s) but its nodes have {node_gpus} "
                   f"({source('node_gpus', -1)}={node_gpus}): no node can run it")
    if node_cpus and cpus > node_cpus:
        out.append(f"{what} needs {cpus} CPUs but its nodes have {node_cpus} "
                   f"({source('node_cpus', 0)}={node_cpus}): no node can run it")
    if node_mem_gb and mem_mb > node_mem_gb * 1024:
        out.append(f"{what} needs {mem_mb / 1024:g} GB but its nodes have {node_mem_gb:g} GB "
                   f"({source('node_mem_gb', 0)}={node_mem_gb:g}): no node can run it")
    return out
