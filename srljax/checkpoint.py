"""Orbax checkpoints of the train state under ``runs/<experiment>/<trial>/checkpoints``.

    ckpt = Checkpointer(cfg.run_dir / "checkpoints", keep=3)
    ckpt.save(update_step, train_state)           # async write, finished by wait()/close()
    state = ckpt.restore(like=algo.init(key))     # newest step; raises CheckpointError if none/corrupt

Old checkpoints are pruned only after a newer one is fully written, so a crash mid-save never
loses the last good checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp


class CheckpointError(RuntimeError):
    pass


class Checkpointer:
    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def save(self, step: int, state: Any, force: bool = True) -> None:
        self._manager.save(step, args=ocp.args.StandardSave(state), force=force)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._manager.all_steps())

    def restore(self, like: Any, step: int | None = None) -> Any:
        """Restore into the structure/dtypes of ``like`` (e.g. a fresh ``algo.init`` state)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.directory}; train first or point at another run folder")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        try:
            return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
        except Exception as err:  # orbax raises several types for a damaged or foreign checkpoint
            raise CheckpointError(
                f"cannot restore checkpoint step {step} from {self.directory}: {type(err).__name__}: {err}. "
                "Was it written by a different config (network sizes, env)? Use a matching config or another step."
            ) from err

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
