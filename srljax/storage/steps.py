"""What a checkpoints folder holds, read without orbax (launchers, resume checks, the config's ``load=``).

    steps(run_dir / "checkpoints")        # [10, 20]: the finished steps
    step, meta = read_meta(run_dir / "checkpoints")   # the newest intact step's meta (plain JSON read)
    damage(run_dir / "checkpoints", 20)   # None, or why step 20 cannot be read (a torn or emptied file)

A step is damaged when one of the JSON files orbax wrote into it (the step's and each item's metadata, the run's
``meta``) is missing, empty or not JSON: a disk that filled up, a copy cut short, a hand edit. ``read_meta`` skips
damaged steps, so a resume continues from the newest intact one (``srljax.storage.run_dir.claim`` moves the
damaged ones aside); damage inside the array data shows only when orbax reads it (``Checkpointer.restore_run``
then falls back to the step before).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

META = "meta"  # the JSON item of a checkpoint step (``srljax/storage/checkpoint.py``)
JSON_FILES = ("_CHECKPOINT_METADATA", "_METADATA", "metadata", "_sharding")  # what orbax writes as JSON in a step


def steps(directory: str | Path) -> list[int]:
    """The finished steps in ``directory`` (orbax renames a step's folder to its number when complete)."""
    try:
        return sorted(int(p.name) for p in Path(directory).iterdir() if p.is_dir() and p.name.isdigit())
    except FileNotFoundError:
        return []


def damage(directory: str | Path, step: int) -> str | None:
    """Why step ``step`` of ``directory`` cannot be restored, as far as its JSON files tell (None: they read)."""
    root = Path(directory) / str(step)
    try:
        items = [p for p in root.iterdir() if p.is_dir()]
        if not items:
            return f"step folder {root} holds no item"
        files = [p for d in (root, *items) for p in d.iterdir() if p.name in JSON_FILES and p.is_file()]
    except OSError as err:
        return f"cannot read {root}: {err.strerror or err}"
    if not files:
        return None  # a layout this does not know (an older orbax): restoring it is the test
    if (root / "state").is_dir() and not (root / META / "metadata").is_file():
        return f"{step}/{META}/metadata is missing"
    for path in files:
        try:
            json.loads(path.read_bytes())
        except (OSError, ValueError):
            size = path.stat().st_size if path.exists() else 0
            return f"{path.relative_to(root.parent)} is " + ("empty" if not size else f"not JSON ({size} bytes)")
    return None


def read_meta(directory: str | Path, step: int | None = None) -> tuple[int, dict[str, Any]] | None:
    """(step, meta) of the newest intact (or the given) finished step; None when there is none. Reads the
    JSON file orbax wrote, so a launcher can check a trial without restoring or creating anything."""
    found = steps(directory)
    if not found or (step is not None and step not in found):
        return None
    if step is None:
        intact = [s for s in found if damage(directory, s) is None]
        if not intact:
            return None
        step = intact[-1]
    path = Path(directory) / str(step) / META / "metadata"
    try:
        return step, json.loads(path.read_text())
    except (OSError, ValueError):
        return step, {}
