"""A worker process of ``SubprocVecEnv`` (``envs/subproc.py``) and the shared block both sides read.

The parent starts ``work`` (by forkserver or spawn) with its end of a pipe; the worker builds its block of
envs, sends their spec, attaches the shared memory block the parent then creates, and serves commands: a
command byte and int32 env ids in, the ids back once their rows (obs, reward, flags) are written to the
block. Nothing on the pipe is pickled: the spec and the block's name go once as JSON, error reports as text.
It stops on ``CLOSE``, when the pipe closes (the parent died, even by SIGKILL), or, from a watcher thread, when the
parent's pid is gone (an env's step may hang).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing import connection, shared_memory

import numpy as np

from envs.python_loop import PythonLoopVecEnv
from srljax.types import EnvSpec, spec_from_wire, spec_to_wire

STEP, RESET, CLOSE = b"S", b"R", b"C"  # parent -> worker: command byte + int32 env ids
DONE, ERROR, SPEC = b"D", b"E", b"P"  # worker -> parent: ids done / one error text / the block's spec
PARENT_POLL_S = 1.0


def block_layout(spec: EnvSpec) -> tuple[dict[str, tuple[tuple[int, ...], np.dtype, int]], int]:
    """Each per-env array of the shared block: name -> (shape, dtype, byte offset); and the block's size."""
    n = spec.num_envs
    arrays = {
        "obs": ((n, *spec.obs_shape), np.dtype(spec.obs_dtype)),
        "action": ((n, *spec.action_shape), np.dtype(np.int64 if spec.action_kind == "discrete" else np.float64)),
        "reward": ((n,), np.dtype(np.float64)),
        "terminated": ((n,), np.dtype(bool)),
        "truncated": ((n,), np.dtype(bool)),
    }
    layout, offset = {}, 0
    for name, (shape, dtype) in arrays.items():
        layout[name] = (shape, dtype, offset)
        offset += (int(np.prod(shape)) * dtype.itemsize + 63) // 64 * 64  # each array starts 64-byte aligned
    return layout, max(offset, 1)


def block_views(spec: EnvSpec, block: shared_memory.SharedMemory) -> dict[str, np.ndarray]:
    layout, _ = block_layout(spec)
    return {name: np.ndarray(shape, dtype, block.buf, offset) for name, (shape, dtype, offset) in layout.items()}


def work(conn: connection.Connection, make_block: Callable[..., PythonLoopVecEnv], first: int, count: int,
         seed: int, parent_pid: int) -> None:
    """A worker: build envs ``first .. first + count - 1``, then step them on command until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent closes us
    threading.Thread(target=watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        copies = make_block(num_envs=count, seed=seed + first)
        if not isinstance(copies, PythonLoopVecEnv):
            raise TypeError(f"make_block returned {type(copies).__name__}, not a PythonLoopVecEnv (python_loop.py)")
    except Exception as error:
        text = f"building envs {first}..{first + count - 1} raised {error!r}\n{traceback.format_exc()}"
        try:
            conn.send_bytes(ERROR + text.encode())
        except OSError:
            pass  # the parent is gone
        return
    block = None
    try:
        conn.send_bytes(SPEC + json.dumps(spec_to_wire(copies.spec)).encode())
        name, wire = json.loads(conn.recv_bytes())
        spec = spec_from_wire(wire)
        block = shared_memory.SharedMemory(name=name)
        serve(conn, copies, block_views(spec, block), first, spec.id)
    except (EOFError, OSError):
        pass  # the parent is gone (its end of the pipe closed, even if it was SIGKILLed): stop
    finally:
        copies.close()
        if block is not None:
            block.close()


def watch_parent(parent_pid: int) -> None:
    """Exit once the parent is gone, even while an env's step hangs (the pipe's EOF covers a worker that reads)."""
    while True:
        time.sleep(PARENT_POLL_S)
        try:
            os.kill(parent_pid, 0)
        except (ProcessLookupError, PermissionError):  # gone (or its pid taken by another user's process)
            os._exit(1)


def serve(conn: connection.Connection, copies: PythonLoopVecEnv, arrays: dict[str, np.ndarray], first: int,
          env_name: str) -> None:
    """Step (or lazily reset) the envs each command names, as ``PythonLoopVecEnv`` does, writing rows to ``arrays``."""
    needs_reset = np.ones(copies.spec.num_envs, bool)
    while True:
        message = conn.recv_bytes()
        command, ids = message[:1], np.frombuffer(message, np.int32, offset=1)
        if command == CLOSE:
            return
        if command == RESET:
            needs_reset[ids - first] = True
        for i in ids.tolist():
            local = i - first
            phase = "reset" if needs_reset[local] else "step"
            try:
                if needs_reset[local]:  # lazy autoreset: the action is ignored, reward 0, no flags
                    obs, reward, terminated, truncated = copies._reset_env(local), 0.0, False, False
                else:
                    obs, reward, terminated, truncated = copies._step_env(local, arrays["action"][i])
                arrays["obs"][i] = obs
            except Exception as error:
                conn.send_bytes(ERROR + (f"env {i} ({env_name}) raised in {phase}: {error!r}\n"
                                         f"worker traceback:\n{traceback.format_exc()}").encode())
                return
            needs_reset[local] = terminated or truncated
            arrays["reward"][i], arrays["terminated"][i], arrays["truncated"][i] = reward, terminated, truncated
        conn.send_bytes(DONE + message[1:])
