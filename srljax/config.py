"""One frozen, typed configuration tree for an experiment.

A config file is plain Python exposing ``experiment() -> Experiment``::

    def experiment() -> Experiment:
        return Experiment(env=EnvConfig(id="CartPole-v1"), total_env_steps=500_000)

Launchers load it, apply ``dotted.key=value`` overrides (``trainer.lr=1e-4``), call
``validate`` (every problem at once, with the arithmetic) and write the resolved tree to
``runs/<experiment>/<trial>/config.json``. Derived sizes are properties; nothing mutates a
config at run time.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from srljax.algo_config import DQNConfig, IMPALAConfig, PPOConfig, ReplayConfig, consumes  # noqa: F401  (re-exported)
from srljax.eval_config import EvalConfig, eval_problems
from srljax.mappo_config import MAPPOConfig  # noqa: F401  (re-exported)
from srljax.objects import FileCallError, call_file, load_object
from srljax.pbt_config import PBTConfig, pbt_problems
from srljax.policy_config import PoliciesConfig, PolicyConfig, policies_problems, policy_experiment  # noqa: F401
from srljax.slurm_config import SlurmConfig, SlurmGroup  # noqa: F401  (re-exported)

THREE_DAYS_SECONDS = 3 * 24 * 3600


@dataclass(frozen=True)
class EnvConfig:
    """Which environment one actor steps, and how many copies."""

    id: str = "CartPole-v1"
    """envpool task id (``Pong-v5``, ``HalfCheetah-v4``, ``CartPole-v1``, ...)."""
    num_envs: int = 8
    """environments owned by one actor (one envpool instance)."""
    batch_size: int = 0
    """environments returned per ``recv``; 0 means ``num_envs`` (sync). Smaller: async env ring."""
    num_threads: int = 0
    """envpool worker threads; 0 lets envpool choose."""
    max_episode_steps: int = 0
    """time limit in agent steps; 0 keeps the env's default (Atari: 27,000; MuJoCo: 1,000)."""
    # Atari-only options (envpool's standard preprocessing: 84x84 gray, frame skip 4, ...).
    episodic_life: bool = True
    """Atari: a lost life ends the learning episode (stats still report whole games)."""
    reward_clip: bool = True
    """Atari: learn from sign(reward); stats report the unclipped return."""
    repeat_action_probability: float = 0.0
    """Atari: sticky actions (0.25 is the Machado et al. protocol)."""
    stack_num: int = 4
    img_height: int = 84
    img_width: int = 84
    noop_max: int = 30
    full_action_space: bool = False
    factory: str = ""
    """user-defined env: ``"package.module:make_fn"``, called as ``make_fn(env_config, seed)``
    and returning an object with the VecEnv interface (see ``envs/base.py``)."""
    obs_mask: tuple[int, ...] = ()
    """keep only these indices of the flattened observation (any env), e.g. ``(0, 2)``: CartPole without
    its velocities, a partially observable task; ``()`` keeps everything."""

    @property
    def envs_per_recv(self) -> int:
        return self.batch_size or self.num_envs

    @property
    def is_async(self) -> bool:
        return self.envs_per_recv < self.num_envs


AlgoConfig = PPOConfig | IMPALAConfig | DQNConfig  # or a user's config dataclass (``algo_config_class``)
ALGO_CONFIGS: dict[str, type] = {"ppo": PPOConfig, "impala": IMPALAConfig, "dqn": DQNConfig, "mappo": MAPPOConfig}


def algo_config_class(name: str, key: str = "algo") -> type:
    """The algo config class ``name`` picks: ``ppo``, ``impala``, ``dqn`` or a user's ``"package.module:Class"``
    (a frozen dataclass whose ``name`` field defaults to that same path; see ``algo_config.py``)."""
    if name in ALGO_CONFIGS:
        return ALGO_CONFIGS[name]
    if ":" not in name:
        raise ConfigError([f"{key}={name!r}: unknown algorithm; known: {', '.join(ALGO_CONFIGS)}, "
                           "or a user config class 'package.module:Class'"])
    try:
        cls = load_object(name, key)
    except ValueError as error:
        raise ConfigError([str(error)]) from None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ConfigError([f"{key}={name!r} names {cls!r}, not an algo config dataclass"])
    return cls


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
    """accelerators per trainer process, data parallel (``srljax/sharding.py``): a count, the first N
    this process sees. Which physical GPUs those are is set per process (``srljax/devices.py``,
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
    node's GPUs) or ``auto`` (gpu if the node has one). See ``srljax/devices.py``."""
    policy_device: Literal["cpu", "gpu", "auto"] = "auto"
    """where policy workers run: as ``actor_device``; several workers per GPU when they outnumber GPUs."""
    memory_fraction: float = 0.0
    """GPU memory each policy worker / GPU actor preallocates (e.g. 0.1 for 8 per GPU with room for a
    trainer); 0: no preallocation, allocate on demand, which suits small inference processes."""
    transport: Literal["tcp", "ipc"] = "tcp"
    """distributed local runs: sockets on ``tcp://127.0.0.1`` or ``ipc://`` (unix sockets)."""
    heartbeat_timeout_seconds: float = 5.0
    """distributed: a worker silent this long is lost and the controller ends the trial."""
    hang_seconds: float = 30.0
    """distributed: a running worker whose main loop has not turned for this long (its control thread
    still heartbeating) is hung: the trial ends as failed, naming it."""
    stall_seconds: float = 300.0
    """distributed: a trial whose trainer made no update for this long after start is stalled: it ends
    as failed, naming the roles that wait and on what."""
    max_restarts: int = 3
    """distributed: how often the controller restarts one lost actor, policy, buffer or custom-role
    worker (its process exited, it fell silent, hung or reported an error) with the same role and
    index before a further loss ends the trial; 0: the first loss ends it. A lost trainer ends the
    trial (see ``srljax/system/controller.py``)."""
    restart_backoff_seconds: float = 1.0
    """distributed: wait before restarting a lost worker: this x 2^(n-1) for its n-th restart in a row
    (a worker that ran 60 s since it came back counts from 1 again), at most 60 s."""
    max_segments_ahead: int = 0
    """distributed actors: segments an actor may push beyond its share of the batches trained so far
    (``batch_envs / num_actors`` columns per params version it has seen) before it waits for a newer
    version (Sample Factory's throttle); 0: its share of ``trainer.publish_every + 1`` batches."""
    custom_roles: tuple[str, ...] = ()
    """user-defined worker roles, ``"package.module:WorkerClass"`` (``*N`` for N workers), run by every
    backend beside the built-in ones (see ``srljax/system/worker.py``)."""
    auth: Literal["auto", "on", "off"] = "auto"
    """distributed: ZeroMQ CURVE on every socket, with a key pair per role written to the run folder
    (``keys/``, owner-only) or, in threads, kept in memory; ``auto``: on for Slurm and multi-host
    trainers (``trainer.num_hosts`` > 1), off for loopback runs on one machine (see docs/architecture.md)."""
    names: Literal["folder", "controller"] = "folder"
    """distributed: where workers publish and look up addresses: ``folder``, a file per name in ``RUN_DIR/names``
    (in memory under the threads backend); ``controller``, served by the controller on a socket (CURVE with
    ``layout.auth``), for thousands of workers or a slow shared filesystem (``srljax/system/names_service.py``)."""


@dataclass(frozen=True)
class LogConfig:
    run_root: str = "runs"
    log_every: int = 1
    """write a metrics line every N updates."""
    window: int = 20
    """recent completed episodes averaged into ``episode_return``."""
    wandb: Literal["disabled", "offline", "online"] = "offline"
    wandb_project: str = "srljax"
    progress: Literal["auto", "bar", "lines"] = "auto"
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


@dataclass(frozen=True)
class Experiment:
    """The root of the tree. ``name``/``trial`` come from ``-e``/``-f`` when launched."""

    name: str = "experiment"
    trial: str = "default"
    seed: int = 1
    total_env_steps: int = 500_000
    timeout_seconds: float = THREE_DAYS_SECONDS
    env: EnvConfig = field(default_factory=EnvConfig)
    algo: AlgoConfig = field(default_factory=PPOConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    layout: LayoutConfig = field(default_factory=LayoutConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    """used by ``python -m launch.slurm`` only."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    pbt: PBTConfig = field(default_factory=PBTConfig)
    policies: PoliciesConfig = field(default_factory=PoliciesConfig)
    """several policies and the agent -> policy table (``srljax/policy_config.py``); default: one shared policy."""

    # -- derived sizes ---------------------------------------------------------------
    @property
    def batch_envs(self) -> int:
        """Environments (columns B) in one training batch: ``trainer.batch_envs``, else ``env.num_envs``."""
        return self.trainer.batch_envs or self.env.num_envs

    @property
    def env_steps_per_update(self) -> int:
        return self.batch_envs * self.algo.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.env_steps_per_update // self.trainer.num_minibatches

    @property
    def num_updates(self) -> int:
        if callable(getattr(self.algo, "num_updates", None)):  # replay algorithms: set by the replay ratio
            return self.algo.num_updates(self)
        return max(1, self.total_env_steps // self.env_steps_per_update)

    @property
    def run_dir(self) -> Path:
        return Path(self.log.run_root) / self.name / self.trial


class ConfigError(ValueError):
    """Raised with every problem in a config, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid config:\n" + "\n".join(f"  - {p}" for p in problems))


def problems(cfg: Experiment) -> list[str]:
    """Every problem with ``cfg``, each naming the key, the arithmetic and the fix."""
    out: list[str] = []
    e, a, t, lay = cfg.env, cfg.algo, cfg.trainer, cfg.layout
    for key, value in [("seed", cfg.seed)]:
        if value < 0:
            out.append(f"{key}={value} must be >= 0")
    try:  # the optimiser's step count and learning-rate schedule are int32
        grad_steps = cfg.num_updates * max(t.update_epochs, 1) * max(t.num_minibatches, 1)
    except (ArithmeticError, ValueError, TypeError):
        grad_steps = 0  # the batch itself is invalid: reported below
    if grad_steps >= 2**31:
        out.append(f"total_env_steps={cfg.total_env_steps:,} is too large: {grad_steps:,} gradient steps "
                   "(updates x trainer.update_epochs x trainer.num_minibatches) overflow the optimiser's int32 "
                   "step count; lower it (e.g. 1e9 for a run meant to end by timeout_seconds)")
    for key, value in [
        ("total_env_steps", cfg.total_env_steps),
        ("env.num_envs", e.num_envs),
        ("algo.num_steps", a.num_steps),
        ("trainer.num_minibatches", t.num_minibatches),
        ("trainer.update_epochs", t.update_epochs),
        ("trainer.devices", t.devices),
        ("trainer.num_hosts", t.num_hosts),
        ("trainer.publish_every", t.publish_every),
        ("layout.num_actors", lay.num_actors),
        ("layout.ring_size", lay.ring_size),
        ("log.log_every", cfg.log.log_every),
        ("log.window", cfg.log.window),
    ]:
        if value < 1:
            out.append(f"{key}={value} must be >= 1")
    if cfg.log.prometheus_port < -1 or cfg.log.prometheus_port > 65535 or (
            cfg.log.prometheus_port > 0 and lay.mode != "single"):
        out.append(f"log.prometheus_port={cfg.log.prometheus_port}: use 0 (every worker on a free port, listed in "
                   "RUN_DIR/prometheus_targets.json), -1 (no endpoints) or, for layout.mode=single only, a port 1-65535")
    if t.overlap_collection and lay.mode != "single":
        out.append(
            "trainer.overlap_collection=True applies to the single-process loop only; a distributed layout "
            "already collects while it trains (bounded by trainer.max_policy_lag): drop the override"
        )
    if e.batch_size < 0 or e.batch_size > e.num_envs:
        out.append(f"env.batch_size={e.batch_size} must be between 0 (sync) and env.num_envs={e.num_envs}")
    elif e.batch_size and e.num_envs % e.batch_size:
        out.append(
            f"env.num_envs={e.num_envs} is not a multiple of env.batch_size={e.batch_size} "
            f"({e.num_envs} % {e.batch_size} = {e.num_envs % e.batch_size}); set env.batch_size to a divisor"
        )
    if not 0.0 <= e.repeat_action_probability <= 1.0:
        out.append(f"env.repeat_action_probability={e.repeat_action_probability} must be in [0, 1]")
    if callable(getattr(a, "problems", None)):
        out.extend(a.problems(cfg))  # the algo config's own checks (PPOConfig, IMPALAConfig, a user's)
    if t.lr <= 0:
        out.append(f"trainer.lr={t.lr} must be > 0")
    for key, value in [("trainer.memory_fraction", t.memory_fraction), ("layout.memory_fraction", lay.memory_fraction)]:
        if not 0.0 <= value < 1.0:
            out.append(f"{key}={value} must be in [0, 1) (0: no limit set)")
    if cfg.timeout_seconds <= 0:
        out.append(f"timeout_seconds={cfg.timeout_seconds} must be > 0 (default 3 days = {THREE_DAYS_SECONDS})")
    # segment batches only: a replay algorithm's batch is algo.batch_size samples (its own problems check it)
    if min(e.num_envs, a.num_steps, t.num_minibatches, t.devices, t.num_hosts) >= 1 and consumes(a) == "segments":
        batch = cfg.env_steps_per_update
        how = f"{cfg.batch_envs} envs x {a.num_steps} steps"
        if batch % t.num_minibatches:
            out.append(
                f"batch {batch} ({how}) is not divisible by trainer.num_minibatches={t.num_minibatches} "
                f"({batch} % {t.num_minibatches} = {batch % t.num_minibatches})"
            )
        else:
            shards = t.devices * t.num_hosts
            mb = batch // t.num_minibatches
            if mb % shards:
                out.append(
                    f"minibatch {mb} (batch {batch} / {t.num_minibatches} minibatches) is not divisible by "
                    f"{shards} trainer devices (trainer.devices={t.devices} x trainer.num_hosts={t.num_hosts})"
                )
        shards = t.devices * t.num_hosts
        if cfg.batch_envs % shards:
            # the batch is split on its env axis, so each device (and each host) gets whole columns
            out.append(
                f"batch of {cfg.batch_envs} env columns ({how.rsplit(' x ', 1)[0]}) does not split across {shards} "
                f"trainer devices (trainer.devices={t.devices} x trainer.num_hosts={t.num_hosts}; "
                f"{cfg.batch_envs} % {shards} = {cfg.batch_envs % shards}); use a multiple of {shards} envs"
            )
        if cfg.total_env_steps >= 1 and cfg.total_env_steps < batch:
            out.append(
                f"total_env_steps={cfg.total_env_steps} is less than one update's batch {batch} ({how}); "
                f"raise total_env_steps or shrink the batch"
            )
    if e.obs_mask and (min(e.obs_mask) < 0 or len(set(e.obs_mask)) != len(e.obs_mask)):
        out.append(f"env.obs_mask={e.obs_mask} must list distinct indices >= 0 of the flat observation")
    if t.max_policy_lag < 0:
        out.append(f"trainer.max_policy_lag={t.max_policy_lag} must be >= 0")
    if lay.mode == "single" and t.num_hosts != 1:
        out.append(f"trainer.num_hosts={t.num_hosts} needs a trainer group: set layout.mode=distributed")
    if lay.mode == "single" and (lay.num_actors != 1 or lay.inference != "inline"):
        out.append("layout.mode=single runs one inline actor: set layout.mode=distributed for more actors or remote inference")
    if t.batch_envs < 0:
        out.append(f"trainer.batch_envs={t.batch_envs} must be >= 0 (0: env.num_envs)")
    if lay.mode == "single" and t.batch_envs and t.batch_envs != e.num_envs:
        out.append(f"trainer.batch_envs={t.batch_envs}: the single-process loop trains on its env.num_envs={e.num_envs} "
                   "envs; set env.num_envs instead")
    if lay.mode == "distributed":
        if lay.num_buffer_workers < 0 or lay.num_policy_workers < 0 or lay.max_segments_ahead < 0:
            out.append("layout.num_buffer_workers, layout.num_policy_workers and layout.max_segments_ahead must be >= 0")
        if lay.max_restarts < 0 or lay.restart_backoff_seconds < 0:
            out.append(f"layout.max_restarts={lay.max_restarts} and layout.restart_backoff_seconds="
                       f"{lay.restart_backoff_seconds} must be >= 0 (0 restarts: a lost worker ends the trial)")
        for key, value in [("layout.heartbeat_timeout_seconds", lay.heartbeat_timeout_seconds),
                           ("layout.hang_seconds", lay.hang_seconds), ("layout.stall_seconds", lay.stall_seconds)]:
            if value <= 0:
                out.append(f"{key}={value} must be > 0")
        ahead = lay.max_segments_ahead * e.num_envs * lay.num_actors
        if lay.max_segments_ahead and lay.num_actors >= 1 and ahead < cfg.batch_envs:
            out.append(f"layout.max_segments_ahead={lay.max_segments_ahead} lets {lay.num_actors} actors x {e.num_envs} "
                       f"envs push {ahead} columns before the first update, less than one batch of "
                       f"trainer.batch_envs={cfg.batch_envs}: the trainer would wait forever; set it to at least "
                       f"{-(-cfg.batch_envs // (e.num_envs * lay.num_actors))} (or 0: automatic)")
        if t.max_policy_lag < t.publish_every - 1:
            out.append(f"trainer.max_policy_lag={t.max_policy_lag} < trainer.publish_every={t.publish_every} - 1: "
                       "samples acted with one published version would be dropped before the next is published; "
                       f"set trainer.max_policy_lag >= {t.publish_every}")
    if cfg.checkpoint.every_updates < 0 or cfg.checkpoint.keep < 1:
        out.append("checkpoint.every_updates must be >= 0 and checkpoint.keep >= 1")
    if cfg.checkpoint.replay and consumes(a) != "replay":
        out.append("checkpoint.replay=true: this algorithm keeps no replay (it trains on fresh segments); drop the override")
    for key, value in [("name", cfg.name), ("trial", cfg.trial)]:
        if not value or "/" in value or value.startswith("."):
            out.append(f"{key}={value!r} must be a non-empty folder name without '/'")
    return out + eval_problems(cfg) + pbt_problems(cfg) + policies_problems(cfg)


def validate(cfg: Experiment) -> Experiment:
    """Return ``cfg`` unchanged, or raise ``ConfigError`` listing every problem."""
    found = problems(cfg)
    if found:
        raise ConfigError(found)
    return cfg


# -- overrides -------------------------------------------------------------------------


def _parse_value(text: str, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError([f"{key}={text!r}: expected a boolean (true/false)"])
    if hint is int:
        try:
            return int(float(text)) if "e" in text.lower() and float(text).is_integer() else int(text.replace("_", ""))
        except ValueError:
            raise ConfigError([f"{key}={text!r}: expected an integer"]) from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError([f"{key}={text!r}: expected a number"]) from None
    if hint is str:
        return text
    if origin is Literal:
        allowed = typing.get_args(hint)
        if text not in allowed:
            raise ConfigError([f"{key}={text!r}: expected one of {', '.join(map(str, allowed))}"])
        return text
    if origin is tuple:
        (item, *_rest) = typing.get_args(hint)
        parts = [p for p in text.strip("()[] ").split(",") if p.strip()]
        return tuple(_parse_value(p.strip(), item, key) for p in parts)
    raise ConfigError([f"{key}: cannot override a field of type {hint} from the command line"])


def apply_overrides(cfg: Any, overrides: list[str] | dict[str, str]) -> Any:
    """``apply_overrides(cfg, ["trainer.lr=1e-4", "env.id=Breakout-v5"])`` -> new frozen tree.

    Unknown keys and bad values are all reported together.
    """
    items = list(overrides.items()) if isinstance(overrides, dict) else overrides
    errors: list[str] = []
    for item in items:
        try:
            key, text = item if isinstance(item, tuple) else _split(item)
            cfg = _set(cfg, key.split("."), text, key)
        except ConfigError as err:
            errors.extend(err.problems)
    if errors:
        raise ConfigError(errors)
    return cfg


def _split(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError([f"override {item!r} is not key=value (e.g. trainer.lr=1e-4)"])
    key, text = item.split("=", 1)
    return key.strip(), text.strip()


def _set(node: Any, path: list[str], text: str, full_key: str) -> Any:
    hints = typing.get_type_hints(type(node))
    names = [f.name for f in dataclasses.fields(node)]
    head = path[0]
    if head not in names:
        import difflib

        close = difflib.get_close_matches(head, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; fields here: {', '.join(names)}"
        raise ConfigError([f"unknown config key {full_key!r}{hint}"])
    if len(path) == 1 and isinstance(node, Experiment) and head == "algo":
        return dataclasses.replace(node, algo=algo_config_class(text, full_key)())  # algo=impala
    if len(path) == 1:
        return dataclasses.replace(node, **{head: _parse_value(text, hints[head], full_key)})
    child = getattr(node, head)
    if not dataclasses.is_dataclass(child):
        raise ConfigError([f"{full_key!r}: {head} is a value, not a section"])
    return dataclasses.replace(node, **{head: _set(child, path[1:], text, full_key)})


# -- files -----------------------------------------------------------------------------


def load_file(path: str | Path) -> Experiment:
    """Import a config file and call its ``experiment()``; the name defaults to the file's stem."""
    path = Path(path)
    try:
        cfg = call_file(path, "experiment", "config", Experiment, "`def experiment() -> Experiment`",
                        "configs/cartpole_ppo.py", "srljax.config.Experiment")
    except FileCallError as err:
        raise ConfigError([str(err)]) from None
    if cfg.name == Experiment.name:
        cfg = dataclasses.replace(cfg, name=path.stem)
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(data: dict[str, Any], cls: type = Experiment) -> Any:
    """Inverse of ``to_dict`` (used by workers that receive the config as JSON)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, hint = data[f.name], hints[f.name]
        if cls is Experiment and f.name == "algo":
            hint = algo_config_class(value.get("name", "ppo"))
        if dataclasses.is_dataclass(hint):
            value = from_dict(value, hint)
        elif typing.get_origin(hint) is tuple:
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def write_json(cfg: Experiment, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path


