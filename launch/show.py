"""``python -m launch.local CFG.py --show [overrides]``: the resolved config tree, what each key means, the sizes.

    python -m launch.local configs/cartpole_ppo.py --show trainer.lr=1e-4
    python -m launch.slurm configs/cartpole_ppo_distributed.py --show      # plus the slurm section and the job

Every field prints as the override that sets it, ``env.num_envs = 8  (int)``, followed by its
meaning: the attribute docstring under the field in the config class's own module (``srljax/config/``, ``algos/ppo_config.py``, ...),
or a user's algo config class (read from the class source with ``ast``;
a field without one shows none). Values that differ from the field's default say so. Then the
derived sizes (batch, updates, minibatches, workers per role; ``srljax.layout``) and the config's
problems, if any. Nothing is created: no run folder, no env.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import sys
import textwrap
import typing
from typing import Any, Literal

from srljax.config import ConfigError, Experiment, apply_overrides, load_file, load_promise
from srljax.config.policies import inference_of
from srljax.layout import ACTOR, build_layout, describe_batch, graph_consumes, segments_ahead
from srljax.prepare import problems
from srljax.storage import run_dir

WIDTH = 100
LAUNCH_KEYS = ("name", "trial")  # set by -e/-f at launch: their class defaults are not worth a note
NEW_TRIAL = "<YYYYmmdd-HHMMSS-xxxxxx>"  # what a launch without -f names the trial


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` for the string literal right under each annotated field of ``cls`` (and its
    dataclass bases); {} when the source is not available (a class defined in a config file, say)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
        for stmt, after in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def type_name(hint: Any) -> str:
    """``int``, ``one of single|distributed``, ``tuple[int, ...]``."""
    if typing.get_origin(hint) is Literal:
        return "one of " + "|".join(map(str, typing.get_args(hint)))
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def value_text(value: Any) -> str:
    """A value as you would write it in an override."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, tuple):
        return "(" + ", ".join(value_text(v) for v in value) + ")" if value else "()"
    return repr(value)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def tree_lines(node: Any, prefix: str = "", skip: tuple[str, ...] = ()) -> list[str]:
    """Every field of the dataclass ``node``, sections after plain fields, each with type and meaning."""
    cls = type(node)
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    plain, sections = [], []
    for f in dataclasses.fields(node):
        key, value = prefix + f.name, getattr(node, f.name)
        if key in skip:
            continue
        if dataclasses.is_dataclass(value):
            sections.append((key, value, docs.get(f.name, "")))
            continue
        default = _default(f)
        changed = default is not dataclasses.MISSING and default != value and key not in LAUNCH_KEYS
        note = f"{type_name(hints.get(f.name, type(value)))}" + (f"; default {value_text(default)}" if changed else "")
        plain.append(f"  {key} = {value_text(value)}  ({note})")
        if docs.get(f.name):
            plain.append(_wrap(docs[f.name], "      "))
    out = plain
    for key, value, doc in sections:
        summary = class_summary(type(value))
        head = f"{key}: {type(value).__name__}" + (f" ({' '.join(doc.split())})" if doc else "")
        out += ["", head] + ([_wrap(summary, "    ")] if summary else []) + tree_lines(value, key + ".", skip)
    return out


def class_summary(cls: type) -> str:
    """The first paragraph of a class's own docstring ("" for the signature ``dataclass`` writes when it has none)."""
    doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    return "" if doc.startswith(f"{cls.__name__}(") else doc.split("\n\n")[0]


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH, initial_indent=indent, subsequent_indent=indent)


def derived_lines(cfg: Experiment) -> list[str]:
    """The sizes a config implies (what the launchers print at start, and more)."""
    if graph_consumes(cfg) == "replay":  # sampled batches: no segments, minibatches or epochs
        return replay_lines(cfg)
    t, batch = cfg.trainer, cfg.env_steps_per_update
    out = ["derived sizes", f"  {describe_batch(cfg)}",
           f"  minibatch {cfg.minibatch_size:,} samples ({batch:,} / trainer.num_minibatches={t.num_minibatches}); "
           f"{t.num_minibatches} minibatches x {t.update_epochs} epochs = {t.num_minibatches * t.update_epochs} "
           "gradient steps per update",
           f"  env steps trained: {cfg.num_updates:,} updates x {batch:,} = {cfg.num_updates * batch:,} "
           f"(total_env_steps={cfg.total_env_steps:,})"]
    if cfg.selfplay.enabled:
        sp = cfg.selfplay
        rule = ("only the current policy (plain self-play)" if sp.sampling == "latest" else
                f"{sp.sampling} over the pool, {sp.latest_share:.0%} of games against the current policy")
        bots = (f"{sp.bot_games} games against each of {', '.join(sp.bots) or 'no bots'} "
                + (f"every {sp.bot_every_updates} updates and " if sp.bot_every_updates else "") + "at the end")
        if sp.league:
            out.append(f"  league: {len(sp.league)} members ({', '.join(sp.league)}), each with its own train state; a "
                       f"snapshot of each every {sp.snapshot_every} updates, {sp.pool_size} kept per member; opponents "
                       f"by role (main: {sp.latest_share:.0%} against itself, PFSP over every snapshot in the rest); "
                       f"the main agents play {bots}")
        else:
            out.append(f"  self-play: a snapshot every {sp.snapshot_every} updates into a pool of {sp.pool_size}; "
                       f"opponents: {rule}; {bots}")
    if cfg.layout.mode != "distributed":
        out.append("  workers: none; the single-process loop acts and trains in the launching process")
    else:
        try:
            layout = build_layout(cfg)
        except ValueError as error:  # a custom role that does not import
            return out + [f"  workers: {error}"]
        groups = [g for g in layout.groups if g.count]
        out.append("  workers: " + ", ".join(
            f"{g.role} x{g.count} ({g.cpus:g} CPU{f', {g.gpus:g} device(s)' if g.gpus else ''}, {g.mem_gb:g} GB each)"
            for g in groups) + " and the controller")
        out.append("  streams: " + ", ".join(f"{s.kind} {s.src} -> {s.dst}" for s in layout.streams))
        if cfg.policies.enabled:
            out.append("  inference per policy: " + ", ".join(
                f"{name} {how} (" + ("served by the policy workers" if how == "remote" else "acted in the actors")
                + f", agents {list(cfg.policies.agents_of(name))})" for name, how in inference_of(cfg).items()))
        if layout.count(ACTOR):
            out.append(f"  each actor: {cfg.env.num_envs} envs, may push {segments_ahead(cfg)} segment(s) ahead of "
                       "its share of the batches trained")
    return out


def replay_lines(cfg: Experiment) -> list[str]:
    """``derived_lines`` for a replay algorithm (DQN, SAC, TD3; distributed: the Ape-X layout): batches, replay ratio,
    replay, workers."""
    from algos.dqn import apex_epsilon
    from algos.dqn_config import DQNConfig
    from srljax.replay.apex import num_shards, replay_ratio, shard_capacity, shard_streams
    from srljax.replay.buffer import sequence_rows

    a = cfg.algo
    ratio = ("algo.replay_ratio" if hasattr(a, "replay_ratio") else
             "the replay ratio (trainer.update_epochs x algo.batch_size / (env.num_envs x algo.num_steps))")
    rows = sequence_rows(a)
    out = ["derived sizes", f"  {describe_batch(cfg)}",
           f"  samples trained: {cfg.num_updates:,} updates x algo.batch_size={a.batch_size} = "
           f"{cfg.num_updates * a.batch_size:,} = {ratio}={replay_ratio(cfg):.4g} x (total_env_steps="
           f"{cfg.total_env_steps:,} - algo.learning_starts={a.learning_starts:,}); one gradient step per batch",
           (f"  sequences of {rows} rows" if rows else f"  n-step windows of {a.n_step}")
           + f"; replay: {a.replay.capacity:,} transitions, "
           + ("uniform (alpha=0)" if a.replay.alpha == 0 else f"prioritized (alpha={a.replay.alpha:g}, beta "
              f"{a.replay.beta0:g} -> 1)") + (", frames deduplicated" if a.replay.dedup_frames else "")]
    if cfg.layout.mode != "distributed":
        out.append("  workers: none; the single-process loop acts and trains in the launching process")
        return out
    layout = build_layout(cfg)
    groups = [g for g in layout.groups if g.count]
    out.append("  workers: " + ", ".join(f"{g.role} x{g.count}" for g in groups) + " and the controller")
    out.append("  streams: " + ", ".join(f"{s.kind} {s.src} -> {s.dst}" for s in layout.streams))
    n, shards = cfg.layout.num_actors, num_shards(cfg)
    if n >= 1:
        eps = ", ".join(f"{apex_epsilon(i, n):.3g}" for i in range(min(n, 8))) + (", ..." if n > 8 else "")
        explore = (f"its own epsilon ({eps})" if isinstance(a, DQNConfig) else
                   f"epsilon {a.eps_start:g} -> {a.eps_end:g} over algo.exploration_fraction={a.exploration_fraction:g} "
                   "of the run's env steps" if hasattr(a, "eps_end") else
                   f"random actions until algo.learning_starts={a.learning_starts:,} env steps")
        out.append(f"  each actor: {cfg.env.num_envs} envs, {explore}, chunks of algo.num_steps="
                   f"{a.num_steps} rows per env to replay buffer worker i % {shards}")
        out.append(f"  each replay buffer worker: {shard_capacity(cfg):,} transitions in {shard_streams(cfg, 0)} env "
                   f"streams; replay ratio held within {a.ratio_tolerance:.0%} (algo.throttle={a.throttle})")
    return out


def render(cfg: Experiment, source: str = "", overrides: tuple[str, ...] = (), slurm: bool = False) -> str:
    """The whole ``--show`` text for ``cfg`` (``slurm``: with the slurm section and the job's components)."""
    head = [f"{cfg.name}/{cfg.trial}" + (f" from {source}" if source else "")
            + (f" with {' '.join(overrides)}" if overrides else ""),
            f"run folder: {cfg.run_dir}", "",
            f"{type(cfg).__name__}: {' '.join(class_summary(type(cfg)).split())}".rstrip(": ")]
    lines = head + tree_lines(cfg, skip=() if slurm else ("slurm",))
    if not slurm:
        lines += ["", "slurm: SlurmConfig (used by python -m launch.slurm only; its --show lists it)"]
    lines += [""] + derived_lines(cfg)
    if slurm:
        lines += _slurm_lines(cfg)
    return "\n".join(lines) + "\n"


def _slurm_lines(cfg: Experiment) -> list[str]:
    from launch.slurm.plan import plan, slurm_problems, time_limit

    if slurm_problems(cfg):
        return []
    out = ["", f"slurm job: one heterogeneous job, time limit {time_limit(cfg)}"]
    for comp in plan(cfg):
        out.append(f"  component {comp.index}: {comp.describe()}  {' '.join(comp.options)}")
    return out


def promise_line(config: str, overridden: bool = False) -> str:
    """What the config file promises (its ``PROMISE``, judged by ``configs/sweeps/gate.py``), at its own budget."""
    promise = load_promise(config)
    if promise is None:
        return "promise: none declared (a config that trains declares PROMISE = Promise(...): srljax/config/promise.py)"
    budget = apply_overrides(load_file(config), list(promise.overrides)).total_env_steps
    return (f"promise (python -m launch.sweep configs/sweeps/gate.py{'' if promise.quick else ' --full'} checks it"
            + ("; it is about the file as shipped, not these overrides" if overridden else "")
            + f"):\n  {promise.describe(budget)}"
            + (f"\n  source: {promise.source}" if promise.source else ""))


def show_config(args: argparse.Namespace, prog: str, slurm: bool = False) -> int:
    """Print the resolved tree for parsed launcher arguments; 0, or 2 if the config has problems."""
    try:
        cfg = apply_overrides(load_file(args.config), args.overrides)
    except ConfigError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    cfg = dataclasses.replace(cfg, name=args.experiment or cfg.name, trial=args.trial or NEW_TRIAL)
    print(render(cfg, args.config, tuple(args.overrides), slurm), end="", flush=True)
    try:
        print("\n" + promise_line(args.config, bool(args.overrides)), flush=True)
    except ConfigError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    if slurm:
        import launch.slurm.plan  # noqa: F401 - registers the Slurm section's checks
    found = problems(cfg, "slurm" if slurm else None)  # every owner's checks (srljax/prepare.py)
    if args.trial and (in_use := run_dir.problems(cfg)):
        print(f"\nnote: {in_use[0]}")
    if found:
        print(f"\n{prog}: {ConfigError(found)}", file=sys.stderr)
        return 2
    print("\nthe config is valid; nothing was created (drop --show to launch it)")
    return 0
