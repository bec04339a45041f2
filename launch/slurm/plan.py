"""The layout graph as the components of one heterogeneous Slurm job, and what is wrong with it.

    comps = plan(cfg)               # [Component(0, groups=(trainer x1, policy x1)), Component(1, (actor x2,))]
    comps[0].options                # ("--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--mem-per-cpu=3072M")
    slurm_problems(cfg)             # [] or ["slurm.trainer.gpus_per_task=16 but its nodes have 8 GPUs ..."]

One component per worker group, so every group gets exactly its per-task resources, partition,
account, QOS and constraint (CPU nodes for actors, GPU nodes for the trainer). A group's
resources are ``slurm.<role>``; user-defined roles (``layout.custom_roles``) all take
``slurm.custom`` (``slurm_group``). Slurm never puts two components of one het job on the same
node, so small groups can join another group's component (``slurm.policy.component=trainer``):
that component is one node holding the sum of its groups, and each group's ``srun --exact`` step
takes its own share. A multi-host trainer (``trainer.num_hosts`` = N > 1) is a component of N
nodes with one task each (``--nodes=N --ntasks=N --ntasks-per-node=1``) and takes no other group:
one component asks the same resources of every node, so a group riding on its first node would
reserve its share on all N. Component 0 holds the trainer; the batch script, and with it the
controller, runs on its first node. An Anakin run (a JAX env, ``layout.mode=single``; ``anakin``) is one plain
job: its ``trainer.num_hosts`` processes, one per node, with ``slurm.trainer``'s resources.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from srljax.config import Experiment, SlurmGroup
from srljax.config.pbt import member_count
from srljax.layout import ACTOR, CUSTOM_SLURM_GROUP, POLICY, ROLES, TRAINER, Layout, build_layout, plan_of
from srljax.prepare import register

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
    one_per_node: bool = False  # a multi-host trainer: ``count`` nodes, one task on each

    @property
    def mem_per_cpu_mb(self) -> int:
        return math.ceil(self.mem_mb / self.cpus)

    def task_options(self) -> list[str]:
        """How many tasks, where, and each task's resources (the same in ``#SBATCH`` and ``srun``)."""
        spread = [f"--nodes={self.count}", f"--ntasks={self.count}", "--ntasks-per-node=1"]
        out = spread if self.one_per_node else [f"--ntasks={self.count}"]
        out += [f"--cpus-per-task={self.cpus}", f"--mem-per-cpu={self.mem_per_cpu_mb}M"]
        return out + ([f"--gpus-per-task={self.gpus}"] if self.gpus else [])

    def step_options(self) -> list[str]:
        """``srun`` options of this group's step: its exact share of the component."""
        return ["--exact", *self.task_options()]


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


def slurm_field(role: str) -> str:
    """The ``cfg.slurm`` field holding ``role``'s resources: its row in ``srljax.layout.ROLES``, else
    ``custom`` (every user-defined role)."""
    spec = ROLES.get(role)
    return spec.slurm_group if spec else CUSTOM_SLURM_GROUP


def slurm_group(cfg: Experiment, role: str) -> SlurmGroup:
    """``role``'s Slurm resources: ``slurm.trainer`` ... ``slurm.actor``, or ``slurm.custom``."""
    return getattr(cfg.slurm, slurm_field(role))


def setting(cfg: Experiment, role: str, key: str) -> str:
    """A group's partition/account/qos/constraint, else the job-wide one."""
    return getattr(slurm_group(cfg, role), key) or getattr(cfg.slurm, key)


def node_size(cfg: Experiment, role: str) -> tuple[int, int, float]:
    """``(cpus, gpus, mem_gb)`` of the nodes ``role`` runs on as the config states them (0, -1, 0: unknown)."""
    g, s = slurm_group(cfg, role), cfg.slurm
    return (g.node_cpus or s.node_cpus, g.node_gpus if g.node_gpus >= 0 else s.node_gpus, g.node_mem_gb or s.node_mem_gb)


def anakin(cfg: Experiment) -> bool:
    """An Anakin run (a JAX env in ``layout.mode=single``, ``srljax/loops/anakin.py``): one job of ``trainer.num_hosts``
    tasks, one per node, each a ``launch/hosts.py`` process of one ``jax.distributed`` group; no controller."""
    return cfg.layout.mode == "single" and plan_of(cfg).loop == "anakin"


def group_plans(cfg: Experiment, layout: Layout | None = None) -> list[GroupPlan]:
    """Every non-empty group, in configure order, with its per-task resources resolved (config over
    the layout's estimate). An Anakin run: its one group, the trainer's ``trainer.num_hosts`` processes."""
    if anakin(cfg):
        sg, hosts = slurm_group(cfg, TRAINER), cfg.trainer.num_hosts
        mem_gb = sg.mem_gb_per_task or ROLES[TRAINER].mem_gb
        return [GroupPlan(TRAINER, hosts, sg.cpus_per_task or 1, sg.gpus_per_task, math.ceil(mem_gb * 1024), 0,
                          hosts > 1)]
    out = []
    for group in (layout or build_layout(cfg)).groups:
        if group.count < 1:
            continue
        sg = slurm_group(cfg, group.role)
        cpus = sg.cpus_per_task or max(1, math.ceil(group.cpus))
        mem_gb = sg.mem_gb_per_task or group.mem_gb
        spread = group.role == TRAINER and group.count > 1 and not member_count(cfg)  # one process per node (not members)
        out.append(GroupPlan(group.role, group.count, cpus, sg.gpus_per_task, math.ceil(mem_gb * 1024), 0, spread))
    return out


def home(cfg: Experiment, role: str) -> str:
    """The role whose component ``role`` runs in (itself unless packed)."""
    return slurm_group(cfg, role).component or role


def plan(cfg: Experiment) -> list[Component]:
    """The het-job components, the trainer's first. Call ``slurm_problems`` first: this assumes a sane config."""
    groups = group_plans(cfg)
    roots = [g.role for g in groups if home(cfg, g.role) == g.role]
    comps = []
    for index, root in enumerate(roots):
        members = tuple(g for g in groups if home(cfg, g.role) == root)
        if len(members) > 1:
            nodes = 1
        elif members[0].one_per_node:
            nodes = members[0].count
        else:
            nodes = slurm_group(cfg, root).nodes
        comps.append(Component(index, members, tuple(_options(cfg, root, members)), setting(cfg, root, "partition"),
                               max(1, nodes)))
    return comps


def _options(cfg: Experiment, root: str, members: tuple[GroupPlan, ...]) -> list[str]:
    sg = slurm_group(cfg, root)
    if len(members) == 1:
        (g,) = members
        out = g.task_options()
        out = ([f"--nodes={sg.nodes}"] if sg.nodes and not g.one_per_node else []) + out
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
    if cfg.layout.mode != "distributed" and not anakin(cfg):
        return [("layout.mode=single trains in one process: run it with python -m launch.local, "
                 "or set layout.mode=distributed to launch the worker graph on Slurm (a JAX env's Anakin run goes "
                 "to Slurm as it is, over trainer.num_hosts nodes)")]
    try:
        layout = build_layout(cfg)
    except ValueError as error:  # a custom role that does not import
        return [str(error)]
    out: list[str] = []
    if anakin(cfg):
        layout = Layout(groups=tuple(g for g in layout.groups if g.role == TRAINER), streams=())
    elif cfg.layout.transport != "tcp":
        out.append("layout.transport=ipc only reaches workers on one node; launch.slurm needs layout.transport=tcp")
    if cfg.layout.shared_memory and not anakin(cfg):
        out.append("layout.shared_memory=true only reaches workers on one node, and launch.slurm places worker groups "
                   "on nodes of their own: set layout.shared_memory=false (or run on one host with launch.local)")
    limit, signal_s = time_limit(cfg), cfg.slurm.signal_seconds
    seconds = time_limit_seconds(limit)
    if seconds is None:
        out.append(f"slurm.time_limit={limit!r} is not a Slurm time (e.g. 3-00:00:00, 12:00:00 or 90 minutes)")
    elif not 0 < signal_s < seconds:
        out.append(f"slurm.signal_seconds={signal_s} must be > 0 and below the time limit {limit} ({seconds} s)")
    if signal_s > SIGNAL_MAX_S:
        out.append(f"slurm.signal_seconds={signal_s} is above Slurm's limit of {SIGNAL_MAX_S}")
    groups = {g.role: g for g in group_plans(cfg, layout)}
    for field in (f.name for f in dataclasses.fields(cfg.slurm) if isinstance(getattr(cfg.slurm, f.name), SlurmGroup)):
        sg = getattr(cfg.slurm, field)
        for name in ("cpus_per_task", "gpus_per_task", "mem_gb_per_task", "nodes"):
            if getattr(sg, name) < 0:
                out.append(f"slurm.{field}.{name}={getattr(sg, name)} must be >= 0 (0: the default)")
        if sg.component and sg.component not in layout.order:
            out.append(f"slurm.{field}.component={sg.component!r} is not a worker group; use one of {', '.join(layout.order)}")
    for role in groups:
        out += _group_problems(cfg, role, groups, layout.order)
    unfit = set()
    for g in groups.values():
        what = f"one {g.role} task (slurm.{slurm_field(g.role)}: {g.cpus} CPUs, {g.gpus} GPUs, {g.mem_mb / 1024:g} GB)"
        on = home(cfg, g.role) if home(cfg, g.role) in groups else g.role  # a packed group runs on its root's nodes
        if found := _fit_problems(cfg, on, g.cpus, g.gpus, g.mem_mb, what):
            out += found
            unfit.add(g.role)
    for root in dict.fromkeys(home(cfg, r) for r in groups if home(cfg, r) != r and home(cfg, r) in groups):
        members = [g for g in groups.values() if home(cfg, g.role) == root]
        if unfit & {g.role for g in members}:
            continue  # already reported per task
        what = f"component {' + '.join(f'{g.role} x{g.count}' for g in members)} (one node)"
        out += _fit_problems(cfg, root, sum(g.count * g.cpus for g in members),
                             sum(g.count * g.gpus for g in members), sum(g.count * g.mem_mb for g in members), what)
    trainer = groups.get(TRAINER)
    if trainer and trainer.gpus and cfg.trainer.devices > trainer.gpus:
        out.append(f"trainer.devices={cfg.trainer.devices} but slurm.trainer.gpus_per_task={trainer.gpus}: "
                   "the trainer would see too few GPUs; ask for as many GPUs as devices")
    for role, choice in ((POLICY, cfg.layout.policy_device), (ACTOR, cfg.layout.actor_device)):
        if choice == "gpu" and role in groups and not groups[role].gpus:
            out.append(f"layout.{role}_device=gpu but slurm.{role}.gpus_per_task=0: its tasks would see no GPU")
    return list(dict.fromkeys(out))  # roles sharing slurm.custom would repeat its problems


def _group_problems(cfg: Experiment, role: str, groups: dict[str, GroupPlan], order: tuple[str, ...]) -> list[str]:
    """Problems of one non-empty group's ``slurm.<field>``: its node count and its packing."""
    sg, key, out = slurm_group(cfg, role), f"slurm.{slurm_field(role)}", []
    g = groups[role]
    if g.one_per_node and sg.nodes and sg.nodes != g.count:
        out.append(f"{key}.nodes={sg.nodes} but trainer.num_hosts={g.count}: the trainer runs one task per node, "
                   f"on exactly {g.count} nodes; set {key}.nodes=0")
    elif sg.nodes > g.count:
        out.append(f"{key}.nodes={sg.nodes} is more than its {g.count} tasks")
    target = sg.component
    if not target or target == role or target not in order:
        return out  # not packed; an unknown group is reported once per slurm field
    if target not in groups:
        return out + [f"{key}.component={target}: there are no {target} workers whose node it could share"]
    if g.one_per_node:
        return out + [f"{key}.component={target}: trainer.num_hosts={g.count} runs one trainer per node on {g.count} "
                      f"nodes, a het-job component of its own; set {key}.component="]
    host, host_nodes = groups[target], slurm_group(cfg, target).nodes
    if home(cfg, target) == target and (host.one_per_node or host_nodes > 1):
        spans = (f"trainer.num_hosts={host.count} nodes (one task each)" if host.one_per_node
                 else f"slurm.{slurm_field(target)}.nodes={host_nodes} nodes")
        others = [r for r in groups if r not in (role, target) and home(cfg, r) == r and not groups[r].one_per_node
                  and not slurm_group(cfg, r).nodes > 1]
        out.append(f"{key}.component={target}, but {target} spans {spans} and a component holding several groups "
                   f"is one node: give {role} a component of its own ({key}.component=)"
                   + (f" or pack it with another group ({key}.component={others[-1]})" if others else ""))
    if home(cfg, target) != target:
        out.append(f"{key}.component={target}, but {target} itself runs in {home(cfg, target)}'s component; "
                   f"set {key}.component={home(cfg, target)}")
    if sg.nodes:
        out.append(f"{key}.nodes={sg.nodes}: a packed group runs on its component's one node; set it to 0")
    if sg.sbatch:
        out.append(f"{key}.sbatch: a packed group has no component of its own; put the options in "
                   f"slurm.{slurm_field(target)}.sbatch")
    for name in ("partition", "account", "qos", "constraint"):
        mine, theirs = getattr(sg, name), setting(cfg, target, name)
        if mine and mine != theirs:
            out.append(f"{key}.{name}={mine!r} differs from its component's ({target}: {theirs or 'default'!r}); "
                       "groups sharing a component share its partition, account, QOS and constraint")
    return out


def _fit_problems(cfg: Experiment, role: str, cpus: int, gpus: int, mem_mb: int, what: str) -> list[str]:
    node_cpus, node_gpus, node_mem_gb = node_size(cfg, role)
    g, key = slurm_group(cfg, role), f"slurm.{slurm_field(role)}"

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


register("launch.slurm", slurm_problems, ("slurm",))  # checked by every entry that targets Slurm
