"""Ape-X's replay in checkpoints: each replay shard's snapshot, keyed by the trainer's checkpoint step.

    write_shard(run_dir, step=4000, shard=1, num_shards=2, state=replay.state())   # replay/4000/shard-1.npz
    complete_steps(run_dir, num_shards=2)     # [2000, 4000]: steps with the orbax step and every shard's file
    state, step = read_shard(run_dir, 4000, shard=1, num_shards=2)
    set_aside_incomplete(run_dir, num_shards=2)  # --resume: newer orbax steps without their replay move away

The shards' contents cannot go into the trainer's orbax step without shipping them over the wire, so
each replay buffer worker writes its own file when the trainer says it wrote checkpoint ``step``
(``save`` on the priorities stream, ``srljax/system/staging/replay_buffer.py``)::

    RUN_DIR/checkpoints/<step>/           the train state (orbax, ``srljax/storage/checkpoint.py``)
    RUN_DIR/replay/<step>/shard-<s>.npz   shard s's replay when it heard of checkpoint <step>

A step is **complete** when its orbax step and the files of all ``layout.num_buffer_workers`` shards
exist; ``--resume`` continues from the newest complete step, trainer and shards alike (the trainer
first moves newer orbax steps, whose replay never got written, to ``RUN_DIR/checkpoints-without-replay/``).
A file is written under a temporary name, fsynced and renamed (then the folder is fsynced), so a
crash leaves no partial file under a final name; files of steps older than the newest complete
step are deleted only after that step is complete, so the previous complete step stays until the
next one is. A snapshot is the shard's replay when the ``save`` message arrived: a few updates'
worth of rows newer than the train state, never older. Pure file handling, no sockets.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from srljax.storage.steps import steps as checkpoint_steps

REPLAY_DIR = "replay"
SET_ASIDE_DIR = "checkpoints-without-replay"
_NUM_SHARDS_KEY = "__num_shards__"
_STEP_KEY = "__step__"


def shard_file(run_dir: str | Path, step: int, shard: int) -> Path:
    return Path(run_dir) / REPLAY_DIR / str(step) / f"shard-{shard}.npz"


def write_shard(run_dir: str | Path, step: int, shard: int, num_shards: int, state: dict[str, np.ndarray]) -> Path:
    """Write shard ``shard``'s ``Replay.state()`` for checkpoint ``step``: temporary file, fsync, rename, fsync
    of the folder. Returns the final path."""
    path = shard_file(run_dir, step, shard)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}-{os.getpid()}.tmp")
    arrays = {k.replace("/", "__"): v for k, v in state.items()}
    with tmp.open("wb") as f:
        np.savez(f, **{_NUM_SHARDS_KEY: np.asarray(num_shards), _STEP_KEY: np.asarray(step)}, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replay_steps(run_dir: str | Path) -> dict[int, set[int]]:
    """Every step with at least one shard file, and the shards it has (final names only)."""
    out: dict[int, set[int]] = {}
    root = Path(run_dir) / REPLAY_DIR
    if not root.is_dir():
        return out
    for folder in root.iterdir():
        if folder.is_dir() and folder.name.isdigit():
            shards = {int(p.stem.split("-", 1)[1]) for p in folder.glob("shard-*.npz") if p.stem.split("-", 1)[1].isdigit()}
            if shards:
                out[int(folder.name)] = shards
    return out


def complete_steps(run_dir: str | Path, num_shards: int) -> list[int]:
    """Steps with a finished orbax checkpoint and the files of shards ``0 .. num_shards - 1``, oldest first."""
    want = set(range(num_shards))
    written = replay_steps(run_dir)
    return [s for s in checkpoint_steps(Path(run_dir) / "checkpoints") if written.get(s, set()) >= want]


def resume_problem(run_dir: str | Path, num_shards: int) -> str | None:
    """Why an Ape-X trial in ``run_dir`` with ``num_shards`` replay shards cannot resume with its replay (None: it can)."""
    saved = saved_num_shards(run_dir)
    if saved is not None and saved != num_shards:
        return (f"its replay snapshots were written by {saved} replay buffer worker(s) and this run has "
                f"layout.num_buffer_workers={num_shards}; resume with the shard count it was saved with "
                "(re-sharding a replay is not built)")
    if complete_steps(run_dir, num_shards):
        return None
    written = replay_steps(run_dir)
    found = ", ".join(f"step {s}: shards {sorted(v)}" for s, v in sorted(written.items())) or "none"
    return (f"no checkpoint step holds the replay of all {num_shards} replay buffer worker(s) "
            f"({Path(run_dir) / REPLAY_DIR}/<step>/shard-<s>.npz; found: {found}): the run stopped before its shards "
            "wrote a snapshot, and a resumed run would start from an empty replay. Start a new trial "
            "(with checkpoint.every_updates=N the shards write one with every checkpoint)")


def saved_num_shards(run_dir: str | Path) -> int | None:
    """The shard count the newest replay file records (None: no file)."""
    written = replay_steps(run_dir)
    if not written:
        return None
    step = max(written)
    with np.load(shard_file(run_dir, step, min(written[step]))) as data:
        return int(data[_NUM_SHARDS_KEY])


def read_shard(run_dir: str | Path, step: int, shard: int, num_shards: int) -> dict[str, np.ndarray]:
    """Shard ``shard``'s ``Replay.state()`` of checkpoint ``step``; ``ValueError`` naming the problem when the file
    was written by a graph with another number of shards."""
    path = shard_file(run_dir, step, shard)
    with np.load(path) as data:
        saved = int(data[_NUM_SHARDS_KEY])
        if saved != num_shards:
            raise ValueError(f"{path} was written by a graph of {saved} replay buffer worker(s); this run has "
                             f"layout.num_buffer_workers={num_shards}. Resume with the shard count it was saved with "
                             "(re-sharding a replay is not built)")
        return {k.replace("__", "/"): data[k] for k in data.files if k not in (_NUM_SHARDS_KEY, _STEP_KEY)}


def prune(run_dir: str | Path, num_shards: int) -> list[int]:
    """Delete the replay files of steps older than the newest complete step (their checkpoints are not what a
    resume restores any more). Returns the steps deleted. Safe to call from every shard at once."""
    complete = complete_steps(run_dir, num_shards)
    if not complete:
        return []
    gone = [s for s in replay_steps(run_dir) if s < complete[-1]]
    for step in gone:
        shutil.rmtree(Path(run_dir) / REPLAY_DIR / str(step), ignore_errors=True)
    return gone


def drop_newer(run_dir: str | Path, step: int, shard: int) -> None:
    """Remove shard ``shard``'s files of steps after ``step`` (a resume from ``step``): they belong to a stopped
    timeline and would otherwise complete a step together with the new run's files."""
    for newer in [s for s in replay_steps(run_dir) if s > step]:
        shard_file(run_dir, newer, shard).unlink(missing_ok=True)


def set_aside_incomplete(run_dir: str | Path, num_shards: int) -> list[int]:
    """``--resume``: move orbax steps newer than the newest complete step out of ``RUN_DIR/checkpoints`` into
    ``RUN_DIR/checkpoints-without-replay/`` (kept, not deleted), so the trainer restores the step whose replay
    the shards restore. Returns the steps moved. Call before the trainer's ``Checkpointer`` exists."""
    complete = complete_steps(run_dir, num_shards)
    if not complete:
        return []
    source = Path(run_dir) / "checkpoints"
    moved = [s for s in checkpoint_steps(source) if s > complete[-1]]
    for step in moved:
        target = Path(run_dir) / SET_ASIDE_DIR / str(step)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        os.replace(source / str(step), target)
    return moved
