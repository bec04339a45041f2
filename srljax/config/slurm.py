"""Slurm settings of an experiment (``Experiment.slurm``), used by ``python -m launch.slurm``.

Kept apart from ``srljax.config`` so that file stays about the experiment itself; both are
plain frozen dataclasses and ``srljax.config`` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SlurmGroup:
    """Slurm resources of one worker group (``python -m launch.slurm``); one Slurm task per worker.

    Each group is one component of a heterogeneous job unless ``component`` packs it into another
    group's (one node, shared). 0 / "" / -1 mean the default noted on the field.
    """

    cpus_per_task: int = 0
    """0: the layout's estimate (actors: ``env.num_threads`` or 1; others: 1)."""
    gpus_per_task: int = 0
    mem_gb_per_task: float = 0.0
    """0: the layout's estimate (trainer and buffers 4 GB, others 2 GB)."""
    nodes: int = 0
    """0: Slurm chooses; e.g. 1 keeps a multi-task group on one node. The trainer always runs one task
    per node, on ``trainer.num_hosts`` nodes: set, this must equal that."""
    partition: str = ""
    """"": ``slurm.partition``; the same for account, qos and constraint."""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    component: str = ""
    """"": a het-job component of its own; a role (``trainer``): share that group's, on one node.
    Components never share nodes, so pack small groups on small clusters. A multi-host trainer
    (``trainer.num_hosts`` > 1) spans several nodes and takes no other group."""
    sbatch: tuple[str, ...] = ()
    """extra ``#SBATCH`` options for this group's component, e.g. ``("--exclusive",)``."""
    node_cpus: int = 0
    """size of the nodes it runs on, if known (checked before submitting); 0/-1: ``slurm.node_*``."""
    node_gpus: int = -1
    node_mem_gb: float = 0.0


@dataclass(frozen=True)
class SlurmConfig:
    """How ``python -m launch.slurm`` renders the worker graph as one heterogeneous Slurm job."""

    partition: str = ""
    """"": the cluster's default partition."""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    time_limit: str = ""
    """"": ``timeout_seconds`` (default 3 days) as ``D-HH:MM:SS``; else any Slurm time (``1-12:00:00``)."""
    signal_seconds: int = 300
    """SIGUSR1 this long before the time limit (``--signal=B:USR1@N``): the controller stops cleanly."""
    requeue: bool = False
    """let Slurm requeue the job (``--requeue``: preemption, node failure, ``scontrol requeue``) and requeue
    it at the time-limit warning; every start after the first resumes the trial from its newest
    checkpoint. False: ``--no-requeue``, a stopped trial is continued by hand with ``--resume``."""
    setup: tuple[str, ...] = ()
    """shell lines run first on every node, e.g. ``("module load cuda/12.4", "source .venv/bin/activate")``."""
    python: str = ""
    """interpreter on the nodes; "": the one that submits (``sys.executable``)."""
    workdir: str = ""
    """repository checkout on the shared filesystem; "": the directory you submit from."""
    container_image: str = ""
    """run every task in this image (pyxis ``srun --container-image``); workdir and run root are mounted."""
    sbatch: tuple[str, ...] = ()
    """extra ``#SBATCH`` options for the whole job, e.g. ``("--mail-type=END",)``."""
    node_cpus: int = 0
    """node sizes, if known: a group asking more per task is rejected before submitting. 0/-1: unknown."""
    node_gpus: int = -1
    node_mem_gb: float = 0.0
    trainer: SlurmGroup = field(default_factory=SlurmGroup)
    buffer: SlurmGroup = field(default_factory=SlurmGroup)
    policy: SlurmGroup = field(default_factory=SlurmGroup)
    actor: SlurmGroup = field(default_factory=SlurmGroup)
    eval: SlurmGroup = field(default_factory=SlurmGroup)
    """the eval manager (``eval.every_updates`` > 0); e.g. ``component="trainer"`` to ride in the trainer's."""
    custom: SlurmGroup = field(default_factory=SlurmGroup)
    """resources of every user-defined role's group (``layout.custom_roles``): each such role is a group
    of its own with these per-task resources; ``component="actor"`` packs them all into the actors'."""
