"""Orbax checkpoints of a run under ``runs/<experiment>/<trial>/checkpoints``.

    ckpt = Checkpointer(cfg.run_dir / "checkpoints", keep=3)
    ckpt.save(update_step, train_state, shell={"acting/key": key}, meta={"env_steps": 4096})
    state = ckpt.restore(like=algo.init(key))                   # the train state of the newest step
    state, shell, meta = ckpt.restore_run(like_state, like_shell)  # everything (``srljax.learning.learner``)
    step, meta = read_meta(run_dir / "checkpoints")             # newest step's meta (plain JSON read)

A step holds up to three items: ``state`` (the learner's ``TrainState``), ``shell`` (numpy arrays
of the loop that drives it: act keys, the rows of segments being built, ...) and ``meta`` (JSON:
counters, the config, its hash, the wandb run id). Orbax writes a step into a temporary folder
and renames it when every item is complete, so a crash mid-save leaves the previous step whole;
old steps are pruned only after a newer one is fully written. Checkpoints written before run
state existed (one item, the train state) still restore with ``restore``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from srljax.storage.steps import META

STATE, SHELL = "state", "shell"
LEGACY_ITEM = "default"  # the item name of a single-item (train state only) checkpoint

# orbax warns for every item of a step that a partial restore leaves out
logging.getLogger("absl").addFilter(lambda record: "could not be restored" not in record.getMessage())


class CheckpointError(RuntimeError):
    pass


def _abstract(tree: Any) -> Any:
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


_OPEN: weakref.WeakSet[Checkpointer] = weakref.WeakSet()
_ONE_AT_A_TIME = threading.Lock()


class Checkpointer:
    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)
        _OPEN.add(self)

    def save(self, step: int, state: Any, shell: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
             force: bool = True) -> None:
        """Write step ``step`` (asynchronously; ``wait``/``close`` finish it). ``shell``: numpy arrays."""
        items = {STATE: ocp.args.StandardSave(state), META: ocp.args.JsonSave(dict(meta or {}, step=step))}
        if shell:
            items[SHELL] = ocp.args.StandardSave(shell)
        if len(_OPEN) > 1:
            # Several in one process (threads backend: a trainer per policy): orbax's background saves of two
            # managers at once collide (shared operation ids; seen as FileExistsError in a step's tmp folder),
            # so each save runs alone and to its end.
            with _ONE_AT_A_TIME:
                self._manager.save(step, args=ocp.args.Composite(**items), force=force)
                self._manager.wait_until_finished()
            return
        self._manager.save(step, args=ocp.args.Composite(**items), force=force)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._manager.all_steps())

    def _step(self, step: int | None) -> int:
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.directory}; train first or point at another run folder")
        return step

    def _restore(self, step: int, items: dict[str, Any]) -> dict[str, Any]:
        try:
            return dict(self._manager.restore(step, args=ocp.args.Composite(**items)))
        except Exception as err:  # orbax raises several types for a damaged or foreign checkpoint
            raise CheckpointError(
                f"cannot restore checkpoint step {step} from {self.directory}: {type(err).__name__}: {err}. "
                "Was it written by a different config (network sizes, env)? Use a matching config or another step."
            ) from err

    def _items(self, step: int) -> set[str]:
        return {p.name for p in (self.directory / str(step)).iterdir() if p.is_dir()}

    def restore(self, like: Any, step: int | None = None) -> Any:
        """The train state of ``step`` (default newest), in the structure/dtypes of ``like`` (e.g. a
        fresh ``algo.init`` state)."""
        step = self._step(step)
        item = STATE if STATE in self._items(step) else LEGACY_ITEM
        return self._restore(step, {item: ocp.args.StandardRestore(_abstract(like))})[item]

    def restore_run(self, like_state: Any, like_shell: dict[str, Any] | None = None,
                    step: int | None = None) -> tuple[Any, dict[str, Any] | None, dict[str, Any]]:
        """(train state, shell arrays or None, meta) of ``step``; by default the newest that restores: a newer
        step orbax cannot read (damaged data) is moved to ``checkpoints.damaged/`` by the primary process and the
        one before is tried, each named in ``self.skipped``."""
        if step is not None:
            return self._restore_run(like_state, like_shell, step)
        self.skipped: list[str] = []
        while True:
            step = self._step(None)
            try:
                return self._restore_run(like_state, like_shell, step)
            except CheckpointError as err:
                earlier = [s for s in self.all_steps() if s < step]
                if not earlier:
                    raise
                why = str(err.__cause__ or err).splitlines()[0][:300]
                if jax.process_index() == 0:
                    from srljax.storage.run_dir import set_aside

                    note = set_aside(self.directory, step, f"orbax cannot restore it: {why}")
                else:
                    note = f"checkpoint step {step} does not restore ({why}); skipped it"
                print(note, flush=True)
                self.skipped.append(note)
                self._manager.reload()
                if self._step(None) == step:  # another process of the group has not moved it yet
                    return self.restore_run(like_state, like_shell, earlier[-1])

    def _restore_run(self, like_state: Any, like_shell: dict[str, Any] | None,
                     step: int) -> tuple[Any, dict[str, Any] | None, dict[str, Any]]:
        found = self._items(step)
        if STATE not in found:  # a train-state-only checkpoint: nothing else to continue from
            return self.restore(like_state, step), None, {"step": step}
        items = {STATE: ocp.args.StandardRestore(_abstract(like_state)), META: ocp.args.JsonRestore()}
        if like_shell and SHELL in found:
            items[SHELL] = ocp.args.StandardRestore(_abstract(like_shell))
        out = self._restore(step, items)
        return out[STATE], out.get(SHELL), out.get(META) or {"step": step}

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
        _OPEN.discard(self)
