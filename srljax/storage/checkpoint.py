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

A step orbax cannot read is moved to ``checkpoints.damaged/`` and the one before restored (``restore_run``); a
background write that failed stops the run at the next update (``check``: a full or read-only disk), and a
save short of file descriptors waits for them (``srljax.storage.descriptors``).
"""

from __future__ import annotations

import errno
import logging
import re
import resource
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from srljax.storage.descriptors import free_files, open_files, short_of_files, wait_for_files
from srljax.storage.steps import META

STATE, SHELL = "state", "shell"
LEGACY_ITEM = "default"  # the item name of a single-item (train state only) checkpoint

FILES_FOR_A_SAVE = 64  # descriptors a save may open at once (orbax's event loop, tensorstore's files)
FILES_WAIT_S = 120.0  # how long a save waits for them before the error stands
FILES_RETRY_S = 0.5
_FAILED: dict[int, BaseException] = {}  # step -> why orbax's background write of it failed (its log record)


def _orbax_log(record: logging.LogRecord) -> bool:
    """absl's log filter: keep the exception of a failed background write (orbax logs it with its traceback and
    drops the step; ``Checkpointer.check`` reports it in one line); mute orbax's warning for every item a partial restore leaves out."""
    message = record.getMessage()
    if "Checkpointer failed" in message and record.exc_info and record.exc_info[1] is not None:
        step = re.search(r"\[step=(\d+)\]", message)
        if step:
            _FAILED[int(step.group(1))] = record.exc_info[1]
            return False  # ``Checkpointer.check`` names it in one line; the traceback would only repeat it
    if record.exc_info and record.exc_info[1] is not None and _disk_fault(record.exc_info[1]):
        return False  # the same full or read-only disk from each of orbax's writer threads: reported once
    if "after interpreter shutdown" in message:
        return False  # a failed write's helper threads, still signalling as the process exits after saying why
    return "could not be restored" not in message


def _disk_fault(err: BaseException) -> bool:
    text = str(err)
    return getattr(err, "errno", None) in (errno.ENOSPC, errno.EROFS, errno.EDQUOT) or any(
        s in text for s in ("No space left on device", "Read-only file system", "Disk quota exceeded"))


logging.getLogger("absl").addFilter(_orbax_log)


def _say_short(step: int, detail: str) -> bool:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"checkpoint step {step}: too many open files ({open_files()} open of the limit {soft}; a flood of "
          f"connections to this process's sockets?){detail}; waiting up to {FILES_WAIT_S:g} s for descriptors "
          "to free up (libzmq drops connections that do not finish the handshake)", flush=True)
    return True


def disk_fix(err: BaseException | None, where: Path) -> str:
    """What to do about a write that failed with ``err`` under ``where``."""
    code = getattr(err, "errno", None)
    if code == errno.ENOSPC or "No space left" in str(err):
        return f"The disk holding {where} is full: free space there, then continue the trial with --resume"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or "Read-only file system" in str(err):
        return f"{where} is not writable (read-only or permissions): fix that, then continue with --resume"
    return "Fix the cause, then continue the trial with --resume"


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
        self._pending: int | None = None  # the step saved last, until it is seen written
        self.failed = False  # a save failed for good: no final checkpoint is tried
        _OPEN.add(self)

    def save(self, step: int, state: Any, shell: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
             force: bool = True) -> None:
        """Write step ``step`` (asynchronously; ``wait``/``close`` finish it). ``shell``: numpy arrays.

        ``CheckpointError`` when the previous step's background write failed (a full disk, a folder made
        read-only), naming it: a run stops at its first failed save. Short of file descriptors (strangers'
        idle connections to this process's sockets), it waits for them (``FILES_WAIT_S``), saying so once, and
        writes this step then; a background write that lost that race is reported and the run goes on."""
        self._check_previous()
        items = {STATE: ocp.args.StandardSave(state), META: ocp.args.JsonSave(dict(meta or {}, step=step))}
        if shell:
            items[SHELL] = ocp.args.StandardSave(shell)
        began, said = time.monotonic(), False
        while True:
            scarce = free_files() < 2 * FILES_FOR_A_SAVE
            if scarce:
                said = said or _say_short(step, "")
                wait_for_files(FILES_FOR_A_SAVE, max(0.0, FILES_WAIT_S - (time.monotonic() - began)))
            try:
                self._save(step, items, force, wait=scarce or len(_OPEN) > 1)
                break
            except Exception as err:
                if not short_of_files(err) or time.monotonic() - began > FILES_WAIT_S:
                    self.failed = True
                    raise CheckpointError(f"checkpoint step {step} could not be written to {self.directory}: "
                                          f"{type(err).__name__}: {err}. {disk_fix(err, self.directory)}") from err
                said = said or _say_short(step, f" ({type(err).__name__}: {err})")
                time.sleep(FILES_RETRY_S)
        if said:
            print(f"checkpoint step {step}: written after waiting {time.monotonic() - began:.1f} s for file "
                  "descriptors", flush=True)
        self._pending = step

    def _save(self, step: int, items: dict[str, Any], force: bool, wait: bool) -> None:
        if len(_OPEN) > 1:
            # Several in one process (threads backend: a trainer per policy): orbax's background saves of two
            # managers at once collide (shared operation ids; seen as FileExistsError in a step's tmp folder),
            # so each save runs alone and to its end.
            with _ONE_AT_A_TIME:
                self._manager.save(step, args=ocp.args.Composite(**items), force=force)
                self._manager.wait_until_finished()
            return
        self._manager.save(step, args=ocp.args.Composite(**items), force=force)
        if wait:
            self._manager.wait_until_finished()

    def check(self) -> None:
        """Without waiting: raise ``CheckpointError`` now if the last save's background write has failed (a run
        stops at its first failed save, not at the next one)."""
        if self._pending is not None and not self._manager.is_saving_in_progress():
            self._check_previous()

    def _check_previous(self) -> None:
        """Raise ``CheckpointError`` if the last step saved was not written (orbax logs a background failure and
        drops the step); report it and go on when the cause was a lack of file descriptors."""
        step, self._pending = self._pending, None
        if step is None:
            return
        self._manager.wait_until_finished()
        if (self.directory / str(step)).is_dir():
            return
        err = _FAILED.pop(step, None)
        if short_of_files(err):
            print(f"checkpoint step {step} was not written: too many open files while orbax wrote it in the "
                  "background; the next checkpoint tries again", flush=True)
            return
        why = f"{type(err).__name__}: {err}" if err is not None else "orbax dropped it (see the log above)"
        self.failed = True
        raise CheckpointError(f"checkpoint step {step} was not written to {self.directory}: {why}. "
                              f"{disk_fix(err, self.directory)}")

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
        self._check_previous()

    def close(self) -> None:
        try:
            self._manager.wait_until_finished()
            if not self.failed:
                self._check_previous()
        finally:
            self._manager.close()
            _OPEN.discard(self)
