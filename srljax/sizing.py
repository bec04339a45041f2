"""Layout sizing from measured unit costs: pure arithmetic, no JAX, no sockets, no clock.

    costs = Costs.from_dict(json.load(open(path)))       # what ``python -m launch.plan CFG --measure`` wrote
    cluster = Cluster(nodes=4, cores_per_node=32, gpus_per_node=1)
    best = rank(costs, cluster, max_policy_lag=4)[0]     # Sized(choice, prediction), fastest first
    best.prediction.sps, best.prediction.bound           # 91234.0, "actors"
    placement(best.choice, costs, cluster)               # [NodeLoad(node=0, roles={"trainer": 1, "actor": 30}, ...), ...]
    overrides(best.choice, costs, cluster)               # ["layout.mode=distributed", "layout.num_actors=120", ...]

The model (docs/architecture.md, "Sizing a layout"). A layout is ``A`` actors of ``E`` envs each (one
segment of ``E`` columns per actor per batch, so ``trainer.batch_envs = A x E``), inline inference or
``P`` policy workers, ``K`` buffer workers, one trainer. Every tier has a rate in env steps/s; the
predicted rate is the smallest of them:

* ``actors``: ``A x E / w`` with ``w`` the wall time of one batch step of an actor (env step, act,
  segment store and send; remote: the request's round trip and the policy worker's act instead of
  the act);
* ``policy``: ``P`` workers each acting on ``E x ceil(A / P)`` rows per call;
* ``trainer``: a batch of ``N = A x E x T`` samples every ``update(N) + N x ingest`` seconds;
* ``buffers``: ``K`` workers each receiving and forwarding;
* ``cpu node i``: the busiest node's cores, less what its worker processes spend whatever their rate
  (``Costs.worker_cores`` each), over the CPU seconds per env step of the workers placed on it
  (every unit cost is measured as wall and as CPU time, so actors that mostly wait on a slow env
  share a core and a machine where everyone shares two cores is still predicted).

Where the actors and the cores meet (the CPU booked nearly full by actors that wait on their env between steps),
a woken actor often finds every core taken: the prediction is the smallest tier's rate times a queueing share,
the rate of each node's actors as a finite-source queue (``actors_sharing_cores``). The actor step's CPU includes
what the real actor process spends beyond the measured loop (``Costs.actor_process``).

The policy lag (params versions between acting and training) is estimated as one update period (a
segment is collected at the pace of the slowest tier) plus the update's own time, in update periods,
capped at ``max_policy_lag``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from srljax.layout import ACTOR, BUFFER, POLICY, TRAINER

CROWDED_KEYS = ("envs", "actors", "cores", "cpu_s", "wall_s")
COST_KEYS = ("num_steps", "env", ACTOR, "act", "update", "sample_bytes_per_step", "ingest")
REMEASURE = "run `python -m launch.plan CFG --measure` again (same overrides) to rewrite it"
WORKER_CORES = 0.01
"""CPU a worker process spends whatever its rate (control thread, heartbeats, polls, params it follows), in cores:
not measured by ``--measure``; fitted from the 25-actor synthetic run of bench/RESULTS.md ("Sizing a layout")."""
OVERBOOK = 2
"""The search weighs actor counts up to this times what the cores hold at full use (queueing for cores, more actors
than that still add a little: ``actors_sharing_cores``)."""
BUFFER_FAN_IN = 256  # actors one trainer process takes directly; more go through buffers (one per this many)


@dataclass(frozen=True)
class Unit:
    """One unit's cost: wall seconds and CPU seconds (all threads of its process) per call."""

    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class Costs:
    """Unit costs of one config on one machine (``launch/plan_measure.py`` writes them)."""

    num_steps: int
    """``algo.num_steps``: steps per segment."""
    env: dict[int, Unit]
    """one batch step of E envs (random actions), by E."""
    actor: dict[int, Unit]
    """one batch step of an inline actor's loop (env step, act, segment store), by E."""
    act: dict[int, Unit]
    """the jitted act on n rows, by n."""
    update: tuple[tuple[int, Unit], ...]
    """(samples in the batch, one update's cost), at two or more batch sizes."""
    sample_bytes_per_step: float
    ingest_recv_cpu_s: float
    """a trainer's CPU per sample received (decode, check, cut into batches), over a real socket."""
    ingest_send_cpu_s: float
    """a sender's CPU per sample pushed."""
    ingest_samples_per_s: float
    """one receiver's measured ceiling (a sender per core pushing as fast as it can)."""
    inference: dict[int, dict[str, float]] = field(default_factory=dict)
    """per request of E rows: ``rtt_s``, ``client_cpu_s``, ``server_cpu_s`` (empty: remote not measured)."""
    device: str = "cpu"
    """what the act and update ran on when measured."""
    worker_cores: float = WORKER_CORES
    """each worker process's CPU whatever its rate, in cores (a ``worker_cores`` entry in the file overrides it)."""
    actor_process: dict[int, Unit] = field(default_factory=dict)
    """the real actor worker's CPU per batch step of E envs, from a short real run (one actor, a trainer): what its
    process spends beyond the loop's ``actor`` unit (its poll, sockets, params, threads) is added to every actor
    step (empty: not measured, nothing added)."""
    actor_crowded: dict[str, float] = field(default_factory=dict)
    """the same run with as many actors as the plan for the measuring machine puts on its cores: ``envs``,
    ``actors``, ``cores`` and the actors' mean ``cpu_s`` per batch step (empty: not measured). Actors that take turns
    on a core spend more CPU per step than one alone (the switches between them, the caches they share):
    ``crowding`` scales every actor step's CPU by the measured ratio, reached at the measured actors per core."""

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Costs:
        missing = [k for k in COST_KEYS if k not in d]
        if missing:
            raise ValueError(f"unit costs lack {', '.join(missing)}: {REMEASURE}")

        def units(table: dict[str, Any], name: str, required: bool = True) -> dict[int, Unit]:
            if not table and required:
                raise ValueError(f"unit costs: {name} has no entries: {REMEASURE}")
            return {int(k): Unit(float(v["wall_s"]), float(v["cpu_s"])) for k, v in table.items()}

        update = tuple(sorted((int(u["samples"]), Unit(float(u["wall_s"]), float(u["cpu_s"]))) for u in d["update"]))
        if len(update) < 1:
            raise ValueError(f"unit costs: update has no batch sizes: {REMEASURE}")
        ingest = d["ingest"]
        return Costs(int(d["num_steps"]), units(d["env"], "env"), units(d[ACTOR], ACTOR), units(d["act"], "act"),
                     update, float(d["sample_bytes_per_step"]), float(ingest["recv_cpu_s_per_sample"]),
                     float(ingest["send_cpu_s_per_sample"]), float(ingest["samples_per_s"]),
                     {int(k): {n: float(x) for n, x in v.items()} for k, v in d.get("inference", {}).items()},
                     str(d.get("device", "cpu")), float(d.get("worker_cores", WORKER_CORES)),
                     units(d.get("actor_process", {}), "actor_process", required=False),
                     {k: float(v) for k, v in d.get("actor_crowded", {}).items() if k in CROWDED_KEYS})

    def actor_overhead_s(self, envs: int) -> float:
        """CPU seconds per batch step the real actor process spends beyond the measured loop (0 where not measured)."""
        real = self.actor_process.get(envs)
        return max(real.cpu_s - self.actor[envs].cpu_s, 0.0) if real is not None else 0.0

    def crowding(self, actors_per_core: float) -> float:
        """The actor step's CPU at ``actors_per_core`` over one actor's alone: 1 where the crowded run was not
        measured or the actors have a core each; linear in actors per core from one per core (1) to the crowded
        run's, held beyond it (no extrapolation)."""
        c = self.actor_crowded
        alone = self.actor_process.get(int(c.get("envs", -1)))
        high = c["actors"] / c["cores"] if c else 0.0
        if alone is None or alone.cpu_s <= 0 or high <= 1.0:
            return 1.0
        share = min(max((actors_per_core - 1.0) / (high - 1.0), 0.0), 1.0)
        return 1.0 + (c["cpu_s"] / alone.cpu_s - 1.0) * share

    def update_cost(self, samples: int) -> Unit:
        """One update on ``samples`` samples: linear through the measured sizes (a line through the two nearest)."""
        return Unit(*(_linear([(n, getattr(u, f)) for n, u in self.update], samples) for f in ("wall_s", "cpu_s")))

    def act_cost(self, rows: int) -> Unit:
        points = sorted(self.act.items())
        return Unit(*(_linear([(n, getattr(u, f)) for n, u in points], rows) for f in ("wall_s", "cpu_s")))


def _linear(points: list[tuple[int, float]], x: float) -> float:
    """Piecewise-linear through ``points`` (sorted by x), extended along the end segments; never below 0, and below
    the smallest point never below that point's cost per unit times ``x`` (a smaller batch does not cost less per
    sample: a line through larger batches that crosses zero above 0 would predict a free small update)."""
    if len(points) == 1:
        n, y = points[0]
        return max(0.0, y * x / n)
    if x <= points[0][0]:
        (x0, y0), (x1, y1) = points[0], points[1]
        line = y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 != x0 else y0
        return max(line, y0 * x / x0 if x0 > 0 else 0.0, 0.0)
    elif x >= points[-1][0]:
        (x0, y0), (x1, y1) = points[-2], points[-1]
    else:
        i = next(i for i, (n, _) in enumerate(points) if n >= x)
        (x0, y0), (x1, y1) = points[i - 1], points[i]
    y = y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 != x0 else y0
    return max(y, 0.0)


@dataclass(frozen=True)
class Cluster:
    nodes: int
    cores_per_node: float
    """cores a node gives the run (a fraction: a machine other jobs share)."""
    gpus_per_node: int = 0

    def problems(self) -> list[str]:
        out = []
        if self.nodes < 1:
            out.append(f"--nodes {self.nodes}: a cluster has at least 1 node")
        if self.cores_per_node < 1:
            out.append(f"--cores-per-node {self.cores_per_node}: a node has at least 1 core")
        if self.gpus_per_node < 0:
            out.append(f"--gpus-per-node {self.gpus_per_node}: must be 0 or more")
        return out


@dataclass(frozen=True)
class Choice:
    """One layout: the knobs ``overrides`` writes."""

    actors: int
    envs: int
    inference: Literal["inline", "remote"] = "inline"
    policy_workers: int = 0
    buffers: int = 0

    @property
    def batch_envs(self) -> int:
        return self.actors * self.envs

    @property
    def processes(self) -> int:
        return self.actors + self.policy_workers + self.buffers + 1


@dataclass(frozen=True)
class Prediction:
    sps: float
    bound: str
    tiers: dict[str, float]
    """each tier's rate in env steps/s (``cpu node i``: the cores of the busiest node)."""
    lag: float
    actor_step_s: float
    """one actor batch step, wall."""
    queueing: float = 1.0
    """the share of the slowest tier's rate left once actors wait for a core (``actors_sharing_cores``; 1: none)."""


@dataclass(frozen=True)
class Sized:
    choice: Choice
    prediction: Prediction


@dataclass(frozen=True)
class NodeLoad:
    node: int
    roles: dict[str, int]
    cpu_per_step: float
    """CPU seconds per env step (of the whole layout) spent by the workers on this node."""
    gpus: int
    fixed_cores: float = 0.0
    """cores its workers spend whatever the rate (``Costs.worker_cores`` each)."""

    def rate(self, cores: float) -> float:
        """Env steps/s this node's ``cores`` allow (inf: nothing on it)."""
        if self.cpu_per_step <= 0:
            return math.inf
        return max(cores - self.fixed_cores, 0.0) / self.cpu_per_step


def actor_costs(costs: Costs, choice: Choice, policy_rows: int = 0, per_core: float = 0.0) -> tuple[float, float]:
    """(wall, CPU) seconds of one actor batch step, segment send included, with ``per_core`` actors per core on
    its node (``Costs.crowding``; 0: as one actor alone)."""
    e = choice.envs
    loop = costs.actor[e]
    send = costs.ingest_send_cpu_s * e + costs.actor_overhead_s(e)  # the segment's send, the worker's own upkeep
    if choice.inference == "inline":
        wall, cpu = loop.wall_s + send, loop.cpu_s + send
    else:
        act, served, inf = costs.act[e], costs.act_cost(policy_rows or e), costs.inference[e]
        wall = loop.wall_s - act.wall_s + inf["rtt_s"] + served.wall_s + send
        cpu = loop.cpu_s - act.cpu_s + inf["client_cpu_s"] + send
    extra = cpu * (costs.crowding(per_core) - 1.0) if per_core > 1.0 else 0.0
    return wall + extra, cpu + extra


def actor_density(choice: Choice, costs: Costs, cluster: Cluster) -> float:
    """Actors per core on the nodes that hold them (one node: all its cores; several: node 0 is the trainer's)."""
    nodes = 1 if cluster.nodes == 1 else actor_nodes(choice, costs, cluster)
    return choice.actors / max(nodes * cluster.cores_per_node, 1e-9)


def policy_rows(choice: Choice) -> int:
    """Rows a policy worker acts on per call when every actor's request is in (the batch it forms)."""
    return choice.envs * math.ceil(choice.actors / max(choice.policy_workers, 1))


def role_cpu(costs: Costs, choice: Choice, per_core: float = 0.0) -> dict[str, float]:
    """CPU seconds per env step of each role, summed over its workers (``per_core``: as ``actor_costs``)."""
    e, n = choice.envs, choice.batch_envs * costs.num_steps
    rows = policy_rows(choice)
    out = {ACTOR: actor_costs(costs, choice, rows, per_core)[1] / e,
           TRAINER: costs.update_cost(n).cpu_s / n + costs.ingest_recv_cpu_s}
    if choice.inference == "remote":
        out[POLICY] = costs.act_cost(rows).cpu_s / rows + costs.inference[e]["server_cpu_s"] / e
    if choice.buffers:
        out[BUFFER] = costs.ingest_recv_cpu_s + costs.ingest_send_cpu_s
    return out


def trainer_cores(costs: Costs, choice: Choice) -> int:
    """Cores the trainer's update keeps busy (its XLA threads): CPU over wall time of one update, at least 1."""
    n = choice.batch_envs * costs.num_steps
    u = costs.update_cost(n)
    return max(1, round(u.cpu_s / u.wall_s)) if u.wall_s > 0 else 1


def placement(choice: Choice, costs: Costs, cluster: Cluster) -> list[NodeLoad]:
    """Workers per node: node 0 holds the trainer, the buffers and the policy workers; on one node the actors
    share it, on several they are spread evenly over the others (``overrides`` writes the same for
    ``launch.slurm``: one het-job component for the actors on nodes 1.., the rest packed with the trainer)."""
    actors = [choice.actors] if cluster.nodes == 1 else [0] + _spread(choice.actors, [1] * actor_nodes(choice, costs,
                                                                                                        cluster))
    actors += [0] * (cluster.nodes - len(actors))
    cpu = role_cpu(costs, choice, actor_density(choice, costs, cluster))
    out = []
    for i in range(cluster.nodes):
        roles = {ACTOR: actors[i]} if actors[i] else {}
        load = cpu[ACTOR] * actors[i] / choice.actors
        if i == 0:
            roles = {TRAINER: 1, **({POLICY: choice.policy_workers} if choice.inference == "remote" else {}),
                     **({BUFFER: choice.buffers} if choice.buffers else {}), **roles}
            load += sum(v for k, v in cpu.items() if k != ACTOR)
        processes = sum(roles.values()) + (i == 0)  # node 0: the controller too
        out.append(NodeLoad(i, roles, load, cluster.gpus_per_node, processes * costs.worker_cores if roles else 0.0))
    return out


def actors_per_core(costs: Costs, envs: int) -> int:
    """Actors of ``envs`` envs one core holds: its wall time over its CPU time (an actor waiting on a slow env
    leaves its core to others), 1 to 64."""
    wall, cpu = actor_costs(costs, Choice(1, envs))
    return max(1, min(64, math.floor(wall / max(cpu, 1e-9))))


def actor_nodes(choice: Choice, costs: Costs, cluster: Cluster) -> int:
    """Nodes the actors take on a cluster of several (node 0 is the trainer's): as few as hold them."""
    per_node = max(1, math.floor(cluster.cores_per_node * actors_per_core(costs, choice.envs)))
    return max(1, min(cluster.nodes - 1, math.ceil(choice.actors / per_node)))


def _spread(count: int, weights: list[int]) -> list[int]:
    """``count`` items over bins in proportion to ``weights`` (largest remainders), summing to ``count``."""
    total = sum(weights)
    exact = [count * w / total for w in weights]
    out = [math.floor(x) for x in exact]
    for i in sorted(range(len(weights)), key=lambda i: out[i] - exact[i])[: count - sum(out)]:
        out[i] += 1
    return out


def predict(costs: Costs, choice: Choice, cluster: Cluster, max_policy_lag: int = 4) -> Prediction:
    """The predicted env steps/s of ``choice`` on ``cluster``, the tier that bounds it, and the policy lag."""
    e, t = choice.envs, costs.num_steps
    n = choice.batch_envs * t
    rows = policy_rows(choice)
    per_core = actor_density(choice, costs, cluster)
    wall, _ = actor_costs(costs, choice, rows, per_core)
    tiers = {"actors": choice.actors * e / wall}
    if choice.inference == "remote":
        served = costs.act_cost(rows).wall_s + costs.inference[e]["server_cpu_s"] * rows / e
        tiers[POLICY] = choice.policy_workers * rows / served
    update = costs.update_cost(n)
    tiers[TRAINER] = n / (update.wall_s + n * costs.ingest_recv_cpu_s)
    if choice.buffers:
        tiers["buffers"] = choice.buffers / (costs.ingest_recv_cpu_s + costs.ingest_send_cpu_s)
    loads = placement(choice, costs, cluster)
    busiest = min(loads, key=lambda load: load.rate(cluster.cores_per_node))
    if busiest.cpu_per_step > 0:
        tiers[f"cpu node {busiest.node}"] = busiest.rate(cluster.cores_per_node)
    bound = min(tiers, key=tiers.get)
    alike = {(load.roles[ACTOR], load.cpu_per_step, load.fixed_cores): load for load in loads if load.roles.get(ACTOR)}
    queued = min((actors_sharing_cores(costs, choice, load, cluster.cores_per_node, tiers, per_core)
                  for load in alike.values()),
                 default=math.inf)
    queueing = min(1.0, queued / tiers[bound]) if tiers[bound] > 0 else 1.0
    sps = tiers[bound] * queueing
    # a segment is acted over one update period (the actors keep the pace of the slowest tier) and then waits
    # for the update in flight: 1 + update / period versions, at most the trainer's cap
    lag = min(float(max_policy_lag), 1.0 + update.wall_s * sps / n)
    return Prediction(sps, bound, tiers, lag, wall, queueing)


def actors_sharing_cores(costs: Costs, choice: Choice, load: NodeLoad, cores: float, tiers: dict[str, float],
                         per_core: float = 0.0) -> float:
    """The layout's env steps/s when the actors of one node take turns on its cores: a closed queueing network in
    which each actor cycles through its wait (env, inference: the batch step's wall less its CPU) and its CPU
    share, the cores a station of ``min(j, cores left)`` servers (``_cycles_per_s``).
    The min() of the tiers assumes a woken actor finds a free core at once; near full booking it queues. The
    node's other workers (trainer, policy, buffers on node 0) take their CPU per env step at the rate the layout
    reaches (the fixed point, by bisection below the tiers' rate)."""
    n = load.roles[ACTOR]
    start = min(tiers.values())
    if start <= 0:
        return math.inf
    wall, cpu = actor_costs(costs, choice, policy_rows(choice), per_core)
    scale = choice.envs * choice.actors / n  # the layout's env steps per actor batch step on this node
    background = max(load.cpu_per_step - role_cpu(costs, choice, per_core)[ACTOR] * n / choice.actors, 0.0)
    others = min((v for k, v in tiers.items() if k != "actors" and not k.startswith("cpu node")), default=math.inf)

    def reached(rate: float) -> float:  # what the actors reach while the rest of the node runs at ``rate``
        left = max(cores - load.fixed_cores - background * rate, 1e-3)
        return min(_cycles_per_s(n, max(wall - cpu, 0.0), cpu, left) * scale, others)

    if reached(start) >= start:
        return start
    low, high = 0.0, start  # reached(r) - r falls as r grows: one crossing
    for _ in range(24 if background > 0 else 0):
        mid = (low + high) / 2
        low, high = (mid, high) if reached(mid) >= mid else (low, mid)
    return reached(high) if background > 0 else reached(0.0)


def _cycles_per_s(customers: int, think_s: float, demand_s: float, servers: float) -> float:
    """Throughput of ``customers`` that each spend ``think_s`` away, then ``demand_s`` of work at a station that
    serves ``min(j, servers)`` of the ``j`` present at once: the finite-source (machine-repairman) queue, whose
    queue-length distribution is ``P(j) ~ N! / (N - j)! x (demand / think)^j / prod_{i <= j} min(i, servers)``
    (product form: it holds for processor sharing whatever the service times' shape)."""
    if demand_s <= 0:
        return customers / think_s if think_s > 0 else math.inf
    if think_s <= 0:
        return min(customers, servers) / demand_s
    j = np.arange(1, customers + 1, dtype=np.float64)
    log_w = np.cumsum(np.log(customers - j + 1) + math.log(demand_s / think_s) - np.log(np.minimum(j, servers)))
    log_w = np.concatenate([[0.0], log_w])
    w = np.exp(log_w - log_w.max())
    present = float(np.dot(np.arange(customers + 1), w) / w.sum())
    return (customers - present) / think_s


def actor_counts(max_actors: int) -> list[int]:
    """Candidate actor counts: every count to 16, then steps of about 12%, and ``max_actors`` itself."""
    out, a = set(), 1
    while a <= max_actors:
        out.add(a)
        a = a + 1 if a < 16 else int(a * 1.125) + 1
    out.add(max_actors)
    return sorted(out)


def choices(costs: Costs, cluster: Cluster, max_actors: int = 0) -> list[Choice]:
    """Every layout the search weighs: each measured env count, inline (and remote where measured), actor counts
    up to the cores times the actors one core can hold (an actor that mostly waits, on its env or on a policy
    worker, shares a core)."""
    out = []
    cores = math.floor(cluster.nodes * cluster.cores_per_node)
    if cluster.nodes > 1:
        cores -= math.floor(cluster.cores_per_node)  # node 0 is the trainer's
    for e in sorted(costs.actor):
        for a in actor_counts(max_actors or OVERBOOK * max(1, cores) * actors_per_core(costs, e)):
            out.append(Choice(a, e, "inline", 0, _buffers(a)))
        if e not in costs.inference or e not in costs.act:
            continue
        wall, cpu = actor_costs(costs, Choice(1, e, "remote", 1))
        per_core = max(1, min(64, math.floor(wall / max(cpu, 1e-9))))
        for a in actor_counts(max_actors or OVERBOOK * max(1, cores) * per_core):
            for p in sorted({1, 2, 4, 8, max(1, cluster.nodes * cluster.gpus_per_node)}):
                if p <= a:
                    out.append(Choice(a, e, "remote", p, _buffers(a)))
    return out


def _buffers(actors: int) -> int:
    return math.ceil(actors / BUFFER_FAN_IN) if actors > BUFFER_FAN_IN else 0


def rank(costs: Costs, cluster: Cluster, max_policy_lag: int = 4, max_actors: int = 0,
         within: float = 0.03) -> list[Sized]:
    """Every candidate layout, best first: of those within ``within`` of the fastest prediction, the one with the
    fewest processes (then the smallest batch); the rest follow, fastest first."""
    sized = [Sized(c, predict(costs, c, cluster, max_policy_lag)) for c in choices(costs, cluster, max_actors)]
    if not sized:
        return []
    fastest = max(s.prediction.sps for s in sized)
    near = [s for s in sized if s.prediction.sps >= fastest * (1 - within)]
    best = min(near, key=lambda s: (s.choice.processes, s.choice.batch_envs))
    return [best] + sorted((s for s in sized if s is not best), key=lambda s: -s.prediction.sps)


def overrides(choice: Choice, costs: Costs, cluster: Cluster) -> list[str]:
    """The ``key=value`` overrides that make a config run ``choice`` (``launch.local`` / ``launch.slurm``)."""
    out = ["layout.mode=distributed", f"layout.num_actors={choice.actors}", f"env.num_envs={choice.envs}",
           "env.batch_size=0", "layout.ring_size=1", f"trainer.batch_envs={choice.batch_envs}",
           f"layout.inference={choice.inference}", f"layout.num_buffer_workers={choice.buffers}"]
    if choice.inference == "remote":
        out.append(f"layout.num_policy_workers={choice.policy_workers}")
    if cluster.nodes > 1:  # launch.slurm: the actors over the other nodes, the rest packed with the trainer
        out += [f"slurm.actor.nodes={actor_nodes(choice, costs, cluster)}", f"slurm.node_cpus={math.ceil(cluster.cores_per_node)}"]
        if choice.inference == "remote":
            out.append("slurm.policy.component=trainer")
        if choice.buffers:
            out.append("slurm.buffer.component=trainer")
    if cluster.gpus_per_node:
        out.append(f"slurm.node_gpus={cluster.gpus_per_node}" if cluster.nodes > 1 else "layout.policy_device=auto")
    return out
