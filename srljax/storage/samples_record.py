"""A trainer's recorded sample stream (``layout.record_samples=true``): every batch it trains on, and its state after.

    recorder = SampleRecorder(run_dir / "samples" / "trainer-0")     # the trainer, in setup
    recorder.batch(version, batch)          # before update ``version + 1``: the columns, their params versions
    recorder.state(version, learner.state)  # after it: a SHA-256 of every leaf of the train state
    for version, batch in read_batches(folder): ...                  # python -m launch.replay RUN_DIR
    read_states(folder)                     # {version: sha256}

Each batch is one ``.npz`` file (``batch-<version>.npz``, numpy's own format, read with ``allow_pickle=False``)
holding the trajectory's arrays (``obs``, ``action``, ``reward``, ``terminated``, ``truncated``,
``policy_version``: the params version each column was acted with, ``extras/<name>``) and ``version``, the
learner's version it went into. ``states.jsonl`` holds one ``{"version", "sha256"}`` line per update. A write
goes to a temporary name and is renamed, so a crash leaves whole files only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from srljax.types import Trajectory

FIELDS = ("obs", "action", "reward", "terminated", "truncated", "policy_version")


def state_digest(state: Any) -> str:
    """SHA-256 over every leaf of a (host) pytree, in its flattening order: dtype, shape and bytes."""
    import jax

    h = hashlib.sha256()
    for leaf in jax.tree.leaves(state):
        x = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{x.dtype.str}{x.shape}".encode())
        h.update(x.tobytes())
    return h.hexdigest()


class SampleRecorder:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def batch(self, version: int, batch: Trajectory) -> None:
        arrays = {name: np.asarray(getattr(batch, name)) for name in FIELDS}
        arrays |= {f"extras/{k}": np.asarray(v) for k, v in batch.extras.items()}
        final = self.folder / f"batch-{version:08d}.npz"
        tmp = final.with_suffix(".tmp.npz")
        np.savez(tmp, version=np.int64(version), **arrays)
        os.replace(tmp, final)

    def state(self, version: int, state: Any) -> str:
        digest = state_digest(state)
        with open(self.folder / "states.jsonl", "a") as f:
            f.write(json.dumps({"version": version, "sha256": digest}) + "\n")
        return digest


def read_batches(folder: Path) -> Iterator[tuple[int, Trajectory]]:
    """``(version, batch)`` in version order; a later file of one version (a resumed trainer's) replaces the first."""
    for path in sorted(Path(folder).glob("batch-*.npz")):
        with np.load(path, allow_pickle=False) as z:
            extras = {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith("extras/")}
            yield int(z["version"]), Trajectory(*(z[name] for name in FIELDS[:5]), extras=extras,
                                                policy_version=z["policy_version"])


def read_states(folder: Path) -> dict[int, str]:
    """``{version: sha256}`` of the live trainer's state after each update (a resumed trainer's lines win)."""
    path = Path(folder) / "states.jsonl"
    out: dict[int, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
                out[int(record["version"])] = str(record["sha256"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash
    return out
