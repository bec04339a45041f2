"""What a checkpoints folder holds, read without orbax (launchers, resume checks, the config's ``load=``).

    steps(run_dir / "checkpoints")        # [10, 20]: the finished steps
    step, meta = read_meta(run_dir / "checkpoints")   # the newest step's meta (plain JSON read)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

META = "meta"  # the JSON item of a checkpoint step (``srljax/storage/checkpoint.py``)


def steps(directory: str | Path) -> list[int]:
    """The finished steps in ``directory`` (orbax renames a step's folder to its number when complete)."""
    try:
        return sorted(int(p.name) for p in Path(directory).iterdir() if p.is_dir() and p.name.isdigit())
    except FileNotFoundError:
        return []


def read_meta(directory: str | Path, step: int | None = None) -> tuple[int, dict[str, Any]] | None:
    """(step, meta) of the newest (or the given) finished step; None when there is none. Reads the
    JSON file orbax wrote, so a launcher can check a trial without restoring or creating anything."""
    found = steps(directory)
    if not found or (step is not None and step not in found):
        return None
    step = found[-1] if step is None else step
    path = Path(directory) / str(step) / META / "metadata"
    try:
        return step, json.loads(path.read_text())
    except (OSError, ValueError):
        return step, {}
