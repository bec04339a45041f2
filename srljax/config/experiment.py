"""``Experiment``, the root of the config tree, and ``problems``: every check of the tree at once."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srljax.config.algo import consumes, default_algo
from srljax.config.env import EnvConfig
from srljax.config.errors import ConfigError
from srljax.config.eval import EvalConfig, eval_problems
from srljax.config.pbt import PBTConfig, pbt_problems
from srljax.config.policies import PoliciesConfig, policies_problems
from srljax.config.psro import PSROConfig, psro_problems
from srljax.config.sections import CheckpointConfig, LayoutConfig, LogConfig, TrainerConfig
from srljax.config.selfplay import SelfPlayConfig, selfplay_problems
from srljax.config.slurm import SlurmConfig

THREE_DAYS_SECONDS = 3 * 24 * 3600


@dataclass(frozen=True)
class Experiment:
    """The root of the tree. ``name``/``trial`` come from ``-e``/``-f`` when launched."""

    name: str = "experiment"
    trial: str = "default"
    seed: int = 1
    seeds: tuple[int, ...] = ()
    """several seeds trained in one compiled program (a JAX env's run, ``srljax/loops/anakin.py``): each seed ``s`` is
    its own trial ``<trial>__seed=<s>`` with ``seed=s``, as if run alone; ``()``: the one trial ``seed`` names."""
    seeds_batch: int = 1
    """how many of ``seeds`` compute side by side (``vmap``) inside the program: 1 runs them one after another
    inside it, each seed exactly the program one seed runs (its figures bit for bit as if run alone, and faster on
    a CPU: bench/RESULTS.md); more vmaps that many at once (throughput on an accelerator), with figures equal to
    a seed run alone only to float tolerance, drifting apart over a long run as sampled actions flip."""
    total_env_steps: int = 500_000
    timeout_seconds: float = THREE_DAYS_SECONDS
    compile_cache: str = "auto"
    """JAX's persistent compilation cache, shared by every process of a run (``srljax/parallel/compile_cache.py``):
    ``auto`` (``~/.cache/srljax/jax-<version>-<environment>``, or ``$JAX_COMPILATION_CACHE_DIR``), ``off``, or a folder."""
    env: EnvConfig = field(default_factory=EnvConfig)
    algo: Any = field(default_factory=default_algo)
    """an algorithm's config (``algos/ppo_config.py``, ...) or a user's; ``algo=NAME`` picks it (``srljax/config/algo.py``)."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    layout: LayoutConfig = field(default_factory=LayoutConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    """used by ``python -m launch.slurm`` only."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    pbt: PBTConfig = field(default_factory=PBTConfig)
    policies: PoliciesConfig = field(default_factory=PoliciesConfig)
    """several policies and the agent -> policy table (``srljax/config/policies.py``); default: one shared policy."""
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    """a two-player game against a pool of the learner's snapshots (``srljax/config/selfplay.py``); default: off."""
    psro: PSROConfig = field(default_factory=PSROConfig)
    """PSRO on a small two-player zero-sum game (``srljax/config/psro.py``); default: off."""

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


def seed_trials(cfg: Experiment) -> list[Experiment]:
    """The trials ``cfg`` stands for: itself, or with ``seeds`` one per seed (``<trial>__seed=<s>``, as a sweep names its trials)."""
    if not cfg.seeds:
        return [cfg]
    return [dataclasses.replace(cfg, seed=s, seeds=(), trial=f"{cfg.trial}__seed={s}") for s in cfg.seeds]


def nonfinite_problems(node: Any, prefix: str = "") -> list[str]:
    """Every float in the tree that is NaN or infinite, one message each: a check written ``x <= 0`` passes NaN,
    so a NaN timeout or watchdog would switch it off silently."""
    out = []
    for f in dataclasses.fields(node):
        value, key = getattr(node, f.name), f"{prefix}{f.name}"
        if isinstance(value, float) and not math.isfinite(value):
            out.append(f"{key}={value} must be a finite number")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out += nonfinite_problems(value, f"{key}.")
        elif isinstance(value, tuple):
            out += [f"{key}={value}: {v} must be a finite number" for v in value
                    if isinstance(v, float) and not math.isfinite(v)]
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item) and not isinstance(item, type):
                    out += nonfinite_problems(item, f"{key}[{i}].")
    return out


def _fits(value: Any, hint: Any) -> bool | None:
    """Whether ``value`` is of the declared type ``hint``; None when the hint is not one this checks."""
    if hint is Any:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        answers = [_fits(value, a) for a in args]
        return None if None in answers else any(answers)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is typing.Literal:
        return value in args
    if origin in (tuple, list) or hint in (tuple, list):
        return isinstance(value, (tuple, list))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return isinstance(value, hint)
    return None


def _type_name(hint: Any) -> str:
    names = {int: "a whole number (int)", float: "a number", bool: "true or false (bool)", str: "text (str)",
             type(None): "None"}
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if typing.get_origin(hint) in (tuple, list):
        return "a list"
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def type_problems(node: Any, prefix: str = "") -> list[str]:
    """Every value of the tree that is not of its field's declared type (a Python config's ``lr="fast"``,
    ``num_envs="8"``, ``num_minibatches=2.5``), one message each; the checks after it do arithmetic on them."""
    try:
        hints = typing.get_type_hints(type(node))
    except Exception:  # an annotation this module cannot resolve: nothing to check against
        return []
    out = []
    for f in dataclasses.fields(node):
        value, key = getattr(node, f.name), f"{prefix}{f.name}"
        fits = _fits(value, hints.get(f.name, Any))
        if fits is False:
            out.append(f"{key}={value!r} ({type(value).__name__}) must be {_type_name(hints[f.name])}; "
                       "fix it in the config file or override it on the command line")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out += type_problems(value, f"{key}.")
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item) and not isinstance(item, type):
                    out += type_problems(item, f"{key}[{i}].")
    return out


SEED_LIMIT = 2**31  # envpool, numpy and JAX take seeds as 32-bit integers


def seed_problems(cfg: Experiment) -> list[str]:
    """A seed whose derived seeds (an actor's envs: ``seed + index * num_envs + i``; opponents, members:
    ``seed + a few thousand``, ``seed + 7919 * index``) leave the 32-bit range."""
    lay = cfg.layout
    actors = max(lay.num_actors, 1) if lay.mode == "distributed" else 1
    spread = actors * max(cfg.env.num_envs, 1) + 7919 * actors + 10_000
    top = SEED_LIMIT - spread
    if cfg.seed >= top:
        return [f"seed={cfg.seed} is too large: the run derives seeds up to seed + {spread:,} (envs of "
                f"{actors} actor(s), opponents, members), which must stay below 2**31; use a seed below {top:,}"]
    return []


def compile_cache_problems(setting: str) -> list[str]:
    """``compile_cache`` (used by ``srljax/parallel/compile_cache.py``): ``auto``, ``off`` or a folder, not a file."""
    if setting in ("auto", "off"):
        return []
    if not setting.strip():
        return ["compile_cache='' : use auto (~/.cache/srljax/jax-<version>-<environment>), off, or a folder"]
    path = Path(setting).expanduser()
    if path.exists() and not path.is_dir():
        return [f"compile_cache={setting} is a file, not a folder: name a folder (created if missing), auto or off"]
    return []


def problems(cfg: Experiment) -> list[str]:
    """Every problem with ``cfg``, each naming the key, the arithmetic and the fix."""
    if wrong := type_problems(cfg):  # the checks below compute with these values
        return wrong
    out: list[str] = nonfinite_problems(cfg) + compile_cache_problems(cfg.compile_cache) + seed_problems(cfg)
    e, a, t, lay = cfg.env, cfg.algo, cfg.trainer, cfg.layout
    for key, value in [("env.max_episode_steps", e.max_episode_steps), ("env.num_threads", e.num_threads)]:
        if value < 0:
            out.append(f"{key}={value} must be >= 0 (0: the env's default)")
    for key, value in [("seed", cfg.seed), *(("seeds", s) for s in cfg.seeds)]:
        if value < 0:
            out.append(f"{key}={value} must be >= 0")
    if len(set(cfg.seeds)) != len(cfg.seeds):
        out.append(f"seeds={list(cfg.seeds)} repeats a seed; give each seed once")
    if cfg.seeds_batch < 1:
        out.append(f"seeds_batch={cfg.seeds_batch} must be >= 1 (1: seeds one after another inside the program)")
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
    if not cfg.log.progress_every_s >= 0:  # NaN too
        out.append(f"log.progress_every_s={cfg.log.progress_every_s} must be >= 0 (0: a line per logged update)")
    if cfg.log.prometheus_port < -1 or cfg.log.prometheus_port > 65535 or (
            cfg.log.prometheus_port > 0 and lay.mode != "single"):
        out.append(f"log.prometheus_port={cfg.log.prometheus_port}: use 0 (every worker on a free port, listed in "
                   "RUN_DIR/prometheus_targets.json), -1 (no endpoints) or, for layout.mode=single only, a port 1-65535")
    if t.overlap_collection and lay.mode != "single":
        out.append(
            "trainer.overlap_collection=True applies to the single-process loop only; a distributed layout "
            "already collects while it trains (bounded by trainer.max_policy_lag): drop the override"
        )
    if e.image_channels not in ("auto", "first", "last"):
        out.append(f"env.image_channels={e.image_channels!r}: use auto (from the shape), first (C, H, W) or last (H, W, C)")
    if e.batch_size < 0 or e.batch_size > e.num_envs:
        out.append(f"env.batch_size={e.batch_size} must be between 0 (sync) and env.num_envs={e.num_envs}")
    elif e.batch_size and e.num_envs % e.batch_size:
        out.append(
            f"env.num_envs={e.num_envs} is not a multiple of env.batch_size={e.batch_size} "
            f"({e.num_envs} % {e.batch_size} = {e.num_envs % e.batch_size}); set env.batch_size to a divisor"
        )
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
    if lay.mode == "single" and t.num_hosts != 1 and not e.is_jax:  # a JAX env: the Anakin loop over hosts
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
        if not 0 <= lay.actor_nice <= 19:
            out.append(f"layout.actor_nice={lay.actor_nice} must be a nice value in 0..19 (higher: lower priority)")
        if lay.max_message_bytes != 0 and lay.max_message_bytes < 1 << 20:
            out.append(f"layout.max_message_bytes={lay.max_message_bytes} must be 0 (each socket's own bound) or at "
                       f"least {1 << 20} (1 MiB: the control channel's messages)")
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
    graph_sequences = consumes(a) == "sequences" and cfg.layout.mode == "distributed"  # QMIX's replay buffer workers
    if cfg.checkpoint.replay and consumes(a) != "replay" and not graph_sequences:
        out.append("checkpoint.replay=true: this algorithm keeps no replay apart from its own checkpoint (it trains "
                   "on fresh segments, or keeps its replay in the Anakin loop's carry); drop the override")
    for key, value in [("name", cfg.name), ("trial", cfg.trial)]:
        if not value or "/" in value or value.startswith("."):
            out.append(f"{key}={value!r} must be a non-empty folder name without '/'")
    out += eval_problems(cfg) + pbt_problems(cfg) + policies_problems(cfg) + deterministic_problems(cfg) + record_problems(cfg)
    out += selfplay_problems(cfg) + psro_problems(cfg)
    # one message per bad value: a NaN or infinity is reported as such, not again by a range check it also fails
    bad = [m.split(" ", 1)[0] for m in out if m.endswith(" must be a finite number")]
    return [m for m in out if m.endswith(" must be a finite number") or not any(b in m for b in bad)]


def deterministic_problems(cfg: Experiment) -> list[str]:
    """What ``layout.deterministic=true`` needs (see ``LayoutConfig.deterministic``)."""
    lay, t, e = cfg.layout, cfg.trainer, cfg.env
    if not lay.deterministic:
        return []
    need = [(lay.mode == "distributed", "layout.mode=distributed (the single-process loop is reproducible as it is)"),
            (lay.inference == "inline", "layout.inference=inline (the launchers set it for you)"),
            (lay.ring_size == 1 and not e.is_async, "layout.ring_size=1 and env.batch_size=0 (an env ring's order "
                                                    "depends on timing)"),
            (lay.num_buffer_workers == 0, "layout.num_buffer_workers=0"),
            (t.num_hosts == 1, "trainer.num_hosts=1"),
            (consumes(cfg.algo) == "segments", "an on-policy algorithm (ppo, impala, ...; replay is sampled "
                                               "as it fills)"),
            (not cfg.pbt.enabled and not cfg.policies.enabled and not cfg.selfplay.league,
             "one policy, no PBT, no league"),
            (cfg.batch_envs == lay.num_actors * e.num_envs,
             f"trainer.batch_envs={lay.num_actors * e.num_envs} (layout.num_actors x env.num_envs: one segment "
             "of each actor per update)"),
            (t.publish_every == 1, "trainer.publish_every=1"),
            (t.max_policy_lag >= 1, "trainer.max_policy_lag >= 1 (a recurrent policy acts a segment's first row "
                                    "one version before the rest)")]
    return [f"layout.deterministic=true needs {what}" for ok, what in need if not ok]


def record_problems(cfg: Experiment) -> list[str]:
    """What ``layout.record_samples=true`` needs: a trainer worker that trains on segments, one of it."""
    if not cfg.layout.record_samples:
        return []
    need = [(cfg.layout.mode == "distributed", "layout.mode=distributed (the single-process loop has no trainer "
                                               "receiving samples to record)"),
            (consumes(cfg.algo) == "segments", "an on-policy algorithm (ppo, impala, ...; a replay trainer's batches "
                                               "are drawn from its buffers, not received)"),
            (cfg.trainer.num_hosts == 1, "trainer.num_hosts=1 (a group's processes each train on their share)"),
            (not cfg.pbt.enabled and not cfg.policies.enabled and not cfg.selfplay.league,
             "one policy, no PBT, no league")]
    return [f"layout.record_samples=true needs {what}" for ok, what in need if not ok]


def deterministic_inference(cfg: Experiment) -> tuple[Experiment, list[str]]:
    """``layout.deterministic=true`` acts inline: a remote layout is switched over, with a note to print."""
    if not cfg.layout.deterministic or cfg.layout.inference == "inline":
        return cfg, []
    layout = dataclasses.replace(cfg.layout, inference="inline")
    return dataclasses.replace(cfg, layout=layout), [
        "layout.deterministic=true: actors act inline (layout.inference=remote set aside: a policy worker batches "
        "requests as they arrive, which timing decides)"]


def validate(cfg: Experiment) -> Experiment:
    """Return ``cfg`` unchanged, or raise ``ConfigError`` listing every problem."""
    found = problems(cfg)
    if found:
        raise ConfigError(found)
    return cfg
