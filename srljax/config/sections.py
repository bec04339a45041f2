"""The run's own sections: the trainer, the worker layout, logging and checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TrainerConfig:
    """Optimisation and the trainer worker(s)."""

    lr: float = 2.5e-4
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0 over the run."""
    max_grad_norm: float = 0.5
    num_minibatches: int = 4
    update_epochs: int = 4
    adam_eps: float = 1e-5
    batch_envs: int = 0
    """env columns (of ``algo.num_steps`` steps each) in one training batch; 0: ``env.num_envs``, one
    actor's envs (the single-process loop's batch). Distributed layouts set it explicitly so the batch
    stays the same whatever the number of actors, envs per actor and buffer workers; a batch may mix
    columns from any actors."""
    devices: int = 1
    """accelerators per trainer process, data parallel (``srljax/parallel/sharding.py``): a count, the first N
    this process sees. Which physical GPUs those are is set per process (``srljax/parallel/devices.py``,
    ``CUDA_VISIBLE_DEVICES``), so a list here would duplicate it and break under renumbering."""
    num_hosts: int = 1
    """trainer processes (one per node on Slurm; local processes with ``launch.local``) that form one
    ``jax.distributed`` group (gloo on CPU); each receives and feeds batch_envs / num_hosts columns of
    every batch, process 0 publishes params, writes metrics and tells the controller it is done."""
    memory_fraction: float = 0.0
    """GPU memory each trainer process preallocates; 0: JAX's default (75%, may grow). Lower it
    when policy workers or actors share the trainer's GPUs."""
    overlap_collection: bool = False
    """single-process loop: collect the next batch in a thread while the update runs, acting with
    the params one update older (deterministic, as Cleanba). Off: strictly on-policy (CleanRL)."""
    publish_every: int = 1
    """publish params to actors every N updates (distributed layouts), and whenever the trainer is idle
    waiting for samples with unpublished updates; updates in between cost nothing extra."""
    max_policy_lag: int = 4
    """distributed layouts: samples older than this many params versions are dropped (and counted)."""


@dataclass(frozen=True)
class LayoutConfig:
    """How the experiment is laid out as workers. ``single`` is one process (notebook, one GPU)."""

    mode: Literal["single", "distributed"] = "single"
    num_actors: int = 1
    num_policy_workers: int = 1
    num_buffer_workers: int = 0
    inference: Literal["inline", "remote"] = "inline"
    ring_size: int = 1
    """distributed actors: env batches in flight per actor (envpool async ring)."""
    actor_device: Literal["cpu", "gpu", "auto"] = "cpu"
    """where actors run inline inference: ``cpu``, ``gpu`` (one per actor, round robin over the
    node's GPUs) or ``auto`` (gpu if the node has one). See ``srljax/parallel/devices.py``."""
    policy_device: Literal["cpu", "gpu", "auto"] = "auto"
    """where policy workers run: as ``actor_device``; several workers per GPU when they outnumber GPUs."""
    memory_fraction: float = 0.0
    """GPU memory each policy worker / GPU actor preallocates (e.g. 0.1 for 8 per GPU with room for a
    trainer); 0: no preallocation, allocate on demand, which suits small inference processes."""
    transport: Literal["tcp", "ipc"] = "tcp"
    """distributed local runs: sockets on ``tcp://127.0.0.1`` or ``ipc://`` (unix sockets)."""
    shared_memory: bool = False
    """distributed, every worker on one host (``launch.local``: local processes or threads; ``launch.slurm`` refuses
    it): samples travel through shared memory. Each sender (actor, buffer) copies a message's arrays into a slot of
    its ring in ``/dev/shm`` and sends only a descriptor over the samples socket; the receiver (buffer, trainer) reads
    the arrays in place, and the trainer's join copies them into its batch: one copy on each side, where a socket
    takes two kernel copies and the join. A slot is the sender's again when the receiver lets go of it or dies; a
    dead sender's ring is removed. Linux only. A sender's ring has a batch's worth of its messages plus 8 slots, given
    memory only as far as they are written (``srljax/comm/shm.py``; bench/RESULTS.md, issue 42 session 25)."""
    heartbeat_timeout_seconds: float = 5.0
    """distributed: a worker silent this long is lost and the controller ends the trial."""
    hang_seconds: float = 30.0
    """distributed: a running worker whose main loop has not turned for this long (its control thread
    still heartbeating) is hung: the trial ends as failed, naming it."""
    stall_seconds: float = 300.0
    """distributed: a trial whose trainer made no update for this long after start is stalled: it ends
    as failed, naming the roles that wait and on what."""
    max_message_bytes: int = 0
    """distributed: the most bytes one received message may hold, all its frames together, on every receiving
    socket (checked before decoding; a larger one is dropped and counted as ``drop.too_big``, its memory given
    back); 0: each socket's own bound, twice the largest message of its stream this trial sends (from the env
    spec and the params) plus 64 KiB. A value below a stream's largest message ends the trial at configure."""
    max_restarts: int = 3
    """distributed: how often the controller restarts one lost actor, policy, buffer or custom-role
    worker (its process exited, it fell silent, hung or reported an error) with the same role and
    index before a further loss ends the trial; 0: the first loss ends it. A lost trainer ends the
    trial (see ``srljax/system/shell/controller.py``)."""
    restart_backoff_seconds: float = 1.0
    """distributed: wait before restarting a lost worker: this x 2^(n-1) for its n-th restart in a row
    (a worker that ran 60 s since it came back counts from 1 again), at most 60 s."""
    max_segments_ahead: int = 0
    """distributed actors: segments an actor may push beyond its share of the batches trained so far
    (``batch_envs / num_actors`` columns per params version it has seen) before it waits for a newer
    version (Sample Factory's throttle); 0: its share of ``trainer.publish_every + 1`` batches."""
    actor_nice: int = 10
    """distributed: the nice value (Linux, 0-19) actors run at, as ``SCHED_BATCH`` threads (no wake-up preemption;
    with 0 they keep the launcher's scheduling) and, where each actor process has its own autogroup (local
    processes on a kernel with ``sched_autogroup_enabled``), with that group's nice too, so a trainer or policy
    worker sharing their cores
    is not starved (on 2 cores, 64 synthetic-env actors at 0 made the trainer's update ~25x slower, see
    bench/RESULTS.md): the whole actor process in local processes and Slurm tasks (jax's compute threads
    too), the actor's loop thread (and the env threads it starts) in the threads backend. 0: the launcher's."""
    deterministic: bool = False
    """distributed, on-policy: reproducible runs. Each actor acts its k-th segment with params version k (it waits
    for that version) and the trainer's update k takes each actor's k-th segment, in actor order, so two runs
    with one seed write the same ``metrics.jsonl`` (time and speed aside). Needs inline inference (the launchers
    set it: a policy worker's batches depend on timing), ``ring_size=1``, no buffer workers, one trainer host,
    ``trainer.batch_envs = num_actors x env.num_envs`` and ``trainer.publish_every=1``. Lockstep: slower than
    the asynchronous default (bench/RESULTS.md)."""
    record_samples: bool = False
    """distributed, on-policy, one trainer process: the trainer writes every batch it trains on (the columns and the
    params version each was acted with) and a SHA-256 of its train state after each update to
    ``RUN_DIR/samples/trainer-<i>/`` (``srljax/storage/samples_record.py``); ``python -m launch.replay RUN_DIR``
    feeds them to a fresh trainer offline and compares its state update by update. Costs a disk write per update
    (a batch's bytes) and a copy of the state to the host."""
    custom_roles: tuple[str, ...] = ()
    """user-defined worker roles, ``"package.module:WorkerClass"`` (``*N`` for N workers), run by every
    backend beside the built-in ones (see ``srljax/system/shell/worker.py``)."""
    auth: Literal["auto", "on", "off"] = "auto"
    """distributed: ZeroMQ CURVE on every socket, with a key pair per role written to the run folder
    (``keys/``, owner-only) or, in threads, kept in memory; ``auto`` (the default) is ``on`` in every backend:
    a loopback port is open to every local process. ``off`` saves ~1 ms per connection (see docs/architecture.md)."""
    names: Literal["folder", "controller"] = "folder"
    """distributed: where workers publish and look up addresses: ``folder``, a file per name in ``RUN_DIR/names``
    (in memory under the threads backend); ``controller``, served by the controller on a socket (CURVE with
    ``layout.auth``), for thousands of workers or a slow shared filesystem (``srljax/system/shell/names_service.py``)."""


@dataclass(frozen=True)
class LogConfig:
    run_root: str = "runs"
    log_every: int = 1
    """write a metrics line every N updates."""
    window: int = 20
    """recent completed episodes averaged into ``episode_return``."""
    wandb: Literal["disabled", "offline", "online"] = "disabled"
    """``disabled`` unless asked: ``offline`` writes a wandb run folder, ``online`` syncs it."""
    wandb_project: str = "srljax"
    progress: Literal["auto", "bar", "lines"] = "auto"
    """the console: ``bar`` a progress bar, ``lines`` a line at most every ``progress_every_s``, ``auto`` the bar
    on a terminal and lines elsewhere (a job log, a pipe). ``metrics.jsonl`` keeps every logged update either way."""
    progress_every_s: float = 5.0
    """``lines``: seconds between two progress lines (the first and the last are always printed); 0: every line."""
    tensorboard: bool = False
    """also write every metrics line, evaluation and the config as TensorBoard event files under
    ``RUN_DIR/tensorboard/`` (``srljax/telemetry/tensorboard.py``; no TensorFlow): ``tensorboard --logdir runs``."""
    prometheus_port: int = 0
    """Prometheus endpoints, listed in ``RUN_DIR/prometheus_targets.json``: 0, every worker and the controller
    (or the single-process loop) on a free port; -1, none; N > 0, the single-process loop on port N."""


@dataclass(frozen=True)
class CheckpointConfig:
    every_updates: int = 0
    """also checkpoint every N updates; 0: only at the end."""
    keep: int = 3
    final: bool = True
    replay: bool = False
    """replay algorithms: checkpoints hold the replay contents too, so ``--resume`` refills it (single process:
    in the same atomic orbax step; distributed: each replay buffer worker's own snapshot, see docs)."""
