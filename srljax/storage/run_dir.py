"""One run per trial folder: a launch never writes into a folder that an earlier run left files in,
unless it resumes that run.

    cfg = dataclasses.replace(cfg, trial=new_trial_name())   # "20250101-120000-3f9a1c"
    problems(cfg)      # [] or ["run folder runs/exp/t1 is not empty (config.json, metrics.jsonl) ..."]
    run_dir = claim(cfg)   # the folder, created; raises RunFolderInUse instead of mixing two runs
    problems(cfg, resume=True)   # [] or why the trial cannot continue (no checkpoint, config differs)
    claim(cfg, resume=True)      # the folder; metrics.jsonl cut back to the checkpoint's update

``launch.cli.resolve`` reports ``problems`` with the config's own (exit 2, nothing created), and
every entry point that writes a run folder (``srljax.loops.train``, ``run_threads``, the local process
launcher) calls ``claim`` before it writes anything, so metrics are never appended to an old
run's, a config never overwrites the one its checkpoints were trained with, and orbax never
meets an earlier run's step. An existing empty folder is fine.

Resume (``--resume``) continues a trial from its newest checkpoint. It is refused, with nothing in
the folder changed, when the trial has no checkpoint, when the config differs from the one the
checkpoint was written with in anything but ``RESUMABLE`` (the differences are listed), and when
the checkpoint already reached ``total_env_steps``. ``claim(cfg, resume=True)`` then moves the
metrics lines logged after the checkpoint's update (a crash between checkpoints) to
``metrics.discarded.jsonl``, so ``metrics.jsonl`` continues without gaps or repeated updates, and says so
(how many lines, which updates, torn or garbage lines, a missing file, updates missing before the checkpoint).
Damaged newer steps (``srljax.storage.steps.damage``) are moved to ``checkpoints.damaged/`` first, each named
with why, and the trial resumes from the newest intact step. ``--resume-from N`` (``resume=N``: an int where
``resume`` is True for the newest) resumes from step N instead: a step that does not exist or is damaged is refused
naming the steps there, and the steps after N are moved to ``checkpoints.later/`` (kept, never deleted), so every
worker, the metrics cut and a Slurm controller see N as the newest.

One live launch per trial: ``claim`` takes ``RUN_DIR/.lock`` (``flock``, held until ``release`` or the
process's death, which the kernel sees to), writing the holder's pid and host into it; ``problems`` names a
live holder first (a second launch or ``--resume`` of a running trial exits 2 before it changes anything).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from srljax.config import ConfigError, Experiment, apply_overrides, from_dict, to_dict
from srljax.layout import graph_consumes
from srljax.storage.steps import damage, read_meta, steps

SHOWN_ENTRIES = 4
LOCK = ".lock"  # RUN_DIR/.lock: flock'd by the live launch of the trial; holds "pid N on host H since T"
RESERVE, RESERVE_BYTES = ".status.reserve", 64 << 10  # held while the lock is: freed to write status.json on a full disk
DAMAGED = "checkpoints.damaged"  # RUN_DIR/checkpoints.damaged/<step>: steps a resume could not use, kept
LATER = "checkpoints.later"  # RUN_DIR/checkpoints.later/<step>: steps after the one ``--resume-from`` chose, kept
LOCK_TRIES, LOCK_WAIT_S = 20, 0.05  # a probe (``holder``) holds the lock shared for microseconds: retry so long
_HELD: dict[str, int] = {}  # this process's locks: the lock file's real path -> its descriptor
SHOWN_DIFFERENCES = 12
RESUMABLE = ("name", "trial", "total_env_steps", "timeout_seconds", "log.", "layout.auth", "layout.max_restarts",
             "layout.restart_backoff_seconds", "slurm.", "eval.", "pbt.")
"""Config keys (a trailing dot: a whole section) a resumed run may change: the run's length, logging,
and what only says how it is transported, restarted and scheduled (``layout.auth``, which a launcher
resolves from ``auto``; the restart budget; the ``slurm`` section, e.g. another partition), and how it
is evaluated (``eval``). ``pbt`` is listed so checkpoints written before the section existed still
resume; a population itself never resumes (``srljax.loops.population`` refuses it)."""


class RunFolderInUse(ConfigError):
    """The trial's run folder holds an earlier run; the message names the folder and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems)
        self.args = ("\n".join(problems),)


def new_trial_name() -> str:
    """A default trial name: the local time to the second plus 24 random bits, so launches in the
    same second (a sweep, two terminals) get different folders, e.g. ``20250101-120000-3f9a1c``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def _lock_path(run_dir: str | Path) -> tuple[Path, str]:
    path = Path(run_dir) / LOCK
    return path, os.path.realpath(path)


def holder(run_dir: str | Path) -> str | None:
    """Who holds the trial's lock (``"pid 123 on host n1 since ..."``); None when no live process does (or this
    one does: a notebook may train one trial twice)."""
    path, key = _lock_path(run_dir)
    if key in _HELD:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 256).decode(errors="replace").strip() or "a process that is starting"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def writable_problem(path: Path) -> str | None:
    """Why files cannot be made at ``path`` (or its nearest existing folder): a read-only mount or missing
    permissions (``access``; it changes nothing, not even a folder's time)."""
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        return None  # a file in the way: the folder checks name it
    if not os.access(where, os.W_OK | os.X_OK):
        why = "a read-only file system" if os.statvfs(where).f_flag & os.ST_RDONLY else "no write permission"
        return (f"cannot write under {where} (for {path}): {why}; make it writable, or pick another run root with "
                "log.run_root=...")
    return None


def in_use_problem(cfg: Experiment, who: str) -> str:
    return (f"trial {cfg.name}/{cfg.trial} is running: its run folder {cfg.run_dir} is locked by {who}; wait for "
            f"that launch to end (or stop it), then continue with -f {cfg.trial} --resume, or pick another trial name "
            "with -f")


def lock(cfg: Experiment) -> None:
    """Take the trial's lock for this process's life (``release`` ends it sooner); ``RunFolderInUse`` naming the
    holder when a live launch has it. The run folder must exist."""
    path, key = _lock_path(cfg.run_dir)
    if key in _HELD:
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    for attempt in range(LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt == LOCK_TRIES - 1:
                who = os.read(fd, 256).decode(errors="replace").strip() or "a process that is starting"
                os.close(fd)
                raise RunFolderInUse([in_use_problem(cfg, who)]) from None
            time.sleep(LOCK_WAIT_S)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
              .encode(), 0)
    _HELD[key] = fd
    _reserve(Path(cfg.run_dir))


def _reserve(run_dir: Path) -> None:
    """Set ``RESERVE_BYTES`` aside in the run folder: room for ``status.json`` once the disk is full."""
    try:
        with open(run_dir / RESERVE, "wb") as f:
            f.write(b"\0" * RESERVE_BYTES)
    except OSError:  # a disk already full: the run's first save will say so
        (run_dir / RESERVE).unlink(missing_ok=True)


def spare_room(run_dir: str | Path) -> bool:
    """Free the run folder's reserve (a full disk: ``status.json`` must still be written); whether there was one."""
    try:
        (Path(run_dir) / RESERVE).unlink()
        return True
    except OSError:
        return False


def release(run_dir: str | Path) -> None:
    """Let go of the trial's lock if this process holds it (a run's end; death releases it too)."""
    fd = _HELD.pop(_lock_path(run_dir)[1], None)
    if fd is not None:
        (Path(run_dir) / RESERVE).unlink(missing_ok=True)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix[:-1]: list(tree) if isinstance(tree, tuple) else tree}


def resumable_keys() -> str:
    """``RESUMABLE`` as users type it: ``total_env_steps, timeout_seconds, log.*, ...`` (``--help``, messages)."""
    return ", ".join(k.rstrip(".") + (".*" if k.endswith(".") else "") for k in RESUMABLE if k not in ("name", "trial"))


def resume_step(resume: bool | int | None) -> int | None:
    """The checkpoint step ``--resume-from N`` asks for (``resume`` an int), None for the newest (a bool)."""
    return None if resume is None or isinstance(resume, bool) else int(resume)


def resuming(resume: bool | int | None) -> bool:
    """Whether ``resume`` asks to continue the trial: True (the newest step) or a step number (0 included)."""
    return resume is not None and resume is not False


def resume_config(cfg: Experiment, overrides: list[str], step: int | None = None) -> tuple[Experiment, list[str]]:
    """The config ``--resume`` continues with: the trial's own (the one its newest checkpoint, or ``step``, was
    written with) with only ``overrides`` applied, and each change as ``key: old -> new``. Without a readable
    checkpoint config, ``cfg`` as it is (``resume_problems`` then says why the trial cannot resume)."""
    found = read_meta(Path(cfg.run_dir) / "checkpoints", step)
    if found is None or not isinstance(found[1].get("config"), dict):
        return cfg, []
    try:
        saved = from_dict(found[1]["config"])
    except (ConfigError, TypeError, ValueError):
        return cfg, []
    saved = dataclasses.replace(saved, name=cfg.name, trial=cfg.trial, log=dataclasses.replace(
        saved.log, run_root=cfg.log.run_root))  # the folder it was found in, whatever the saved root said
    resumed = apply_overrides(saved, overrides)
    old, new = _flat(to_dict(saved)), _flat(to_dict(resumed))
    return resumed, [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(new) if old.get(k) != new.get(k)]


_KEPT: dict[str, Path] = {}  # run folder -> the config.<n>.json this process kept there last


def keep_config(run_dir: Path) -> None:
    """Before a resumed start writes ``config.json``: keep the one there as ``config.<n>.json`` (n = 1, 2, ...)."""
    current = run_dir / "config.json"
    if current.exists():
        n = 1 + sum(1 for p in run_dir.glob("config.*.json") if p.name.split(".")[1].isdigit())
        kept = run_dir / f"config.{n}.json"
        kept.write_text(current.read_text())
        _KEPT[os.path.realpath(run_dir)] = kept


def undo_keep_config(run_dir: Path) -> None:
    """A resume that failed to restore: put back the ``config.json`` it replaced (a failed resume changes no
    config)."""
    kept = _KEPT.pop(os.path.realpath(run_dir), None)
    if kept is not None and kept.exists():
        os.replace(kept, Path(run_dir) / "config.json")


def _resumable(key: str) -> bool:
    return any(key == r or (r.endswith(".") and key.startswith(r)) for r in RESUMABLE)


def config_digest(cfg: Experiment) -> str:
    """A short hash of the config without the keys a resume may change (``RESUMABLE``)."""
    kept = {k: v for k, v in sorted(_flat(to_dict(cfg)).items()) if not _resumable(k)}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_differences(saved: dict[str, Any], cfg: Experiment) -> list[str]:
    """``key: saved -> now`` for every non-resumable key where ``cfg`` differs from ``saved`` (a
    ``to_dict`` of the checkpoint's config)."""
    old, new = _flat(saved), _flat(to_dict(cfg))
    defaults = _flat(to_dict(Experiment()))

    def same(k: str) -> bool:
        if k not in old and k in new:  # a key added to the config since, left at its default: nothing changed
            return k in defaults and new[k] == defaults[k]
        return old.get(k, "(absent)") == new.get(k, "(absent)")

    return [f"{k}: {old.get(k, '(absent)')!r} -> {new.get(k, '(absent)')!r}" for k in sorted(set(old) | set(new))
            if not _resumable(k) and not same(k)]


def step_problem(directory: Path, step: int, where: str) -> str | None:
    """Why ``--resume-from step`` cannot resume from ``directory``: no such step, or a damaged one (None: it reads)."""
    found = steps(directory)
    intact = [s for s in found if damage(directory, s) is None]
    there = (f"the intact steps there: {', '.join(map(str, intact))}" if intact else "none there is intact") + (
        f" (damaged: {', '.join(str(s) for s in found if s not in intact)})" if len(intact) < len(found) else "")
    fix = ("; resume from one of them with --resume-from STEP, or from the newest with --resume" if intact
           else "; start a new trial")
    if step not in found:
        return f"cannot resume {where} from checkpoint step {step}: {directory} holds no step {step}; {there}{fix}"
    if why := damage(directory, step):
        return f"cannot resume {where} from checkpoint step {step}: it is damaged ({why}); {there}{fix}"
    return None


def resume_problems(cfg: Experiment, step: int | None = None) -> list[str]:
    """Why ``cfg`` cannot resume its trial ([] if it can); ``step``: from that checkpoint step (``--resume-from``)."""
    run_dir = Path(cfg.run_dir)
    where = f"trial {cfg.name}/{cfg.trial} ({run_dir})"
    if cfg.pbt.enabled:
        return [f"cannot resume {where}: resuming a population (pbt.population={cfg.pbt.population}) is not built "
                "(the members' checkpoints hold their train states, not the manager's ranking and lineage): start a "
                "new trial without --resume"]
    if cfg.psro.enabled:
        return [f"cannot resume {where}: resuming PSRO is not built (its best responses' params are in psro/policies/, "
                "not a resumable state): start a new trial without --resume"]
    if cfg.selfplay.enabled and cfg.selfplay.league:
        return [f"cannot resume {where}: resuming a league (selfplay.league) is not built (the members' checkpoints "
                "hold their train states, not the league's snapshots, match matrix and ratings): start a new trial "
                "without --resume"]
    if graph_consumes(cfg) == "replay" and not cfg.checkpoint.replay:
        return [f"cannot resume {where}: it runs with checkpoint.replay=false, so its checkpoints do not hold the "
                "replay and a resumed run would start from an empty one; start a new trial with "
                "checkpoint.replay=true to make it resumable"]
    if step is not None and run_dir.is_dir() and (problem := step_problem(run_dir / "checkpoints", step, where)):
        return [problem]
    found = read_meta(run_dir / "checkpoints", step)
    if found is None:
        state = "does not exist" if not run_dir.exists() else "holds no checkpoint"
        return [f"cannot resume {where}: the folder {state}. Start it as a new run without --resume "
                "(on a non-empty folder, under another trial name with -f)"]
    step, meta = found
    if "config" not in meta:
        return [f"cannot resume {where}: its newest checkpoint (update {step}) holds only the train state, "
                "written before run state existed; start a new trial"]
    diffs = config_differences(meta["config"], cfg)
    if diffs:
        shown = diffs[:SHOWN_DIFFERENCES] + ([f"... and {len(diffs) - SHOWN_DIFFERENCES} more"]
                                              if len(diffs) > SHOWN_DIFFERENCES else [])
        return [f"cannot resume {where}: the config differs from the one its checkpoint (update {step}) was "
                f"written with; only {resumable_keys()} may change (--resume starts from the trial's own config: "
                "give only the keys to change), or start a new trial. Differences:\n  "
                + "\n  ".join(shown)]
    if graph_consumes(cfg) == "replay" and cfg.layout.mode == "distributed":  # Ape-X: the shards' own replay files
        from srljax.replay.snapshots import resume_problem

        if problem := resume_problem(run_dir, max(1, cfg.layout.num_buffer_workers)):
            return [f"cannot resume {where}: {problem}"]
    env_steps = int(meta.get("env_steps", 0))
    if env_steps >= cfg.total_env_steps or step >= cfg.num_updates:
        return [f"cannot resume {where}: its checkpoint (update {step}, {env_steps:,} env steps) already reached "
                f"total_env_steps={cfg.total_env_steps:,}; raise total_env_steps to train it further"]
    return []


def problems(cfg: Experiment, resume: bool | int = False) -> list[str]:
    """Why ``cfg`` may not start in its run folder ([] if the folder is missing or empty); with
    ``resume``, why it may not continue the run in it (from step ``resume`` if that is an int: ``--resume-from``).
    A live launch of the trial holding its lock comes first."""
    if (who := holder(cfg.run_dir)) is not None:
        return [in_use_problem(cfg, who)]
    if problem := writable_problem(Path(cfg.run_dir) / "checkpoints" if resuming(resume) else Path(cfg.run_dir)):
        return [problem]
    if resuming(resume):
        return resume_problems(cfg, resume_step(resume))
    run_dir = Path(cfg.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        return [f"run folder {run_dir} is a file; pick another trial name with -f (trial=...) or move it away"]
    try:
        entries = sorted(p.name for p in run_dir.iterdir() if p.name not in (LOCK, RESERVE))  # left by an ended launch
    except FileNotFoundError:
        return []
    if not entries:
        return []
    shown = ", ".join(entries[:SHOWN_ENTRIES]) + (f" and {len(entries) - SHOWN_ENTRIES} more"
                                                  if len(entries) > SHOWN_ENTRIES else "")
    can_resume = read_meta(run_dir / "checkpoints") is not None
    return [f"run folder {run_dir} is not empty ({shown}): it holds an earlier run of trial {cfg.name}/{cfg.trial}, "
            "and a new run would mix with it. "
            + ("Continue it from its newest checkpoint with --resume (resume=True in Python), or pick"
               if can_resume else "Pick")
            + " another trial name with -f (trial=... in Python), or move that folder away"]


def load_problems(cfg: Experiment) -> list[str]:
    """Checkpoints the config reads (each policy's ``load=``) that hold no finished step."""
    return [f"policy {p.name!r}: load={p.load!r} holds no finished checkpoint step; point it at a checkpoints "
            "folder (RUN_DIR/policies/<name>/checkpoints)" for p in cfg.policies.named if p.load and not steps(p.load)]


def claim(cfg: Experiment, resume: bool | int = False) -> Path:
    """Create ``cfg.run_dir`` for a new run, take its lock and return it; raise ``RunFolderInUse`` if an earlier
    run is in it or a live launch holds it. With ``resume``: check the trial can continue, move damaged newer
    checkpoint steps aside, cut ``metrics.jsonl`` back to the checkpoint (saying what went)."""
    if found := problems(cfg, resume):
        raise RunFolderInUse(found)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o700)  # owner-only: its names (addresses), keys and checkpoints are no one else's business
    lock(cfg)
    if found := problems(cfg, resume):  # under the lock: a launch that ended between the check and the lock
        release(run_dir)
        raise RunFolderInUse(found)
    if resuming(resume):
        for note in set_aside_later(run_dir / "checkpoints", resume_step(resume)):
            print(f"resume: {note}", flush=True)
        step, _ = read_meta(run_dir / "checkpoints") or (0, {})
        for note in set_aside_damaged(run_dir / "checkpoints", step):
            print(f"resume: {note}", flush=True)
        for note in rollback_metrics(run_dir / "metrics.jsonl", step, report=True):
            print(f"resume: {note}", flush=True)
        keep_config(run_dir)
    return run_dir


def _move_step(directory: Path, step: int, folder: str) -> Path:
    target = directory.parent / folder / str(step)
    n = 1
    while target.exists():
        target, n = directory.parent / folder / f"{step}.{n}", n + 1
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(directory / str(step)), str(target))
    return target


def set_aside(directory: Path, step: int, why: str) -> str:
    """Move checkpoint step ``step`` of ``directory`` to ``RUN_DIR/checkpoints.damaged/`` (kept, never deleted);
    return what was done, naming the step and ``why``."""
    target = _move_step(directory, step, DAMAGED)
    return f"checkpoint step {step} is damaged ({why}); moved it to {target} and skipped it"


_MOVED_LATER: dict[str, list[tuple[int, Path]]] = {}  # checkpoints folder -> the steps this process moved to LATER


def put_back_later(directory: Path) -> None:
    """Undo this process's ``set_aside_later`` of ``directory`` (a submit that was refused changes no file)."""
    for step, target in _MOVED_LATER.pop(str(directory), []):
        shutil.move(str(target), str(directory / str(step)))


def set_aside_later(directory: Path, step: int | None) -> list[str]:
    """``--resume-from step``: move the steps after ``step`` to ``RUN_DIR/checkpoints.later/`` (kept: moving one back
    to ``checkpoints/`` makes it resumable again); say which. Nothing for ``step`` None (the newest)."""
    later = [s for s in steps(directory) if step is not None and s > step]
    if not later:
        return []
    targets = [_move_step(directory, s, LATER) for s in later]
    _MOVED_LATER[str(directory)] = list(zip(later, targets))
    return [f"resuming from checkpoint step {step} as asked: moved the later steps {', '.join(map(str, later))} to "
            f"{targets[0].parent} (kept; move one back into {directory} to resume from it)"]


def set_aside_damaged(directory: Path, intact: int) -> list[str]:
    """Move the steps newer than ``intact`` (the newest that reads) aside; say which and why, and where the run
    continues from."""
    notes = [set_aside(directory, s, damage(directory, s) or "unreadable") for s in steps(directory) if s > intact]
    if notes:
        notes.append(f"continuing from checkpoint step {intact}, the newest intact one")
    return notes


def _span(updates: list[int]) -> str:
    return f"update {updates[0]}" if len(updates) == 1 else f"updates {min(updates)}-{max(updates)}"


def rollback_metrics(path: Path, update: int, report: bool = False) -> Any:
    """Keep the lines of ``path`` up to ``update``; move later ones and unreadable ones to
    ``metrics.discarded.jsonl`` (appended, never lost). Returns how many lines moved, or with ``report`` what
    happened, in words: lines moved (which updates, how many torn or garbage) or a missing file."""
    notes: list[str] = []
    if not path.exists():
        if update > 0:
            notes.append(f"{path} is missing: the lines of updates 1-{update} are gone; the resumed run's lines "
                         f"start at update {update + 1}")
        return notes if report else 0
    keep, drop, later, torn = [], [], [], 0
    for line in path.read_text(errors="replace").splitlines(keepends=True):
        try:
            n = int(json.loads(line).get("update", 0))
        except (ValueError, AttributeError, TypeError):
            torn += 1  # a line torn by the crash, or garbage: moved aside with the others, not lost
            drop.append(line)
            continue
        if n > update:
            later.append(n)
            drop.append(line)
        else:
            keep.append(line)
    if drop:
        discarded = path.parent / "metrics.discarded.jsonl"
        with discarded.open("a") as out:
            out.writelines(line if line.endswith("\n") else line + "\n" for line in drop)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(keep))
        os.replace(tmp, path)
        what = []
        if later:
            what.append(f"{len(later)} line(s) of {_span(later)}, logged after the checkpoint of update {update}")
        if torn:
            what.append(f"{torn} unreadable line(s) (torn or not JSON)")
        notes.append(f"moved {' and '.join(what)} from {path.name} to {discarded}")
    return notes if report else len(drop)
