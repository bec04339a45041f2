"""Blocks of Python envs stepped in parallel in worker processes, with envpool's semantics (a VecEnv).

    env = SubprocGymnasiumVecEnv(functools.partial(gymnasium.make, "Acrobot-v1"), num_envs=16, seed=0)
    env = SubprocVecEnv(functools.partial(MyLoopEnv, level=3), num_envs=16, seed=0, batch_size=8)  # a ring
    # from a config: env.factory=envs.gym_adapter:make_gymnasium env.options.processes=16

Worker ``w`` builds ``make_block(num_envs=count, seed=seed + first)`` (a ``PythonLoopVecEnv``) and steps its
envs, so seeding, lazy autoreset and episode statistics are the in-process ones. Why: a Python env that waits
(a simulator, I/O) is bound by the one loop; processes let its waits overlap (``bench/RESULTS.md``, "Python envs
in parallel"; for envs as fast as CartPole keep them in-process). ``make_block`` reaches the workers by pickle,
once (a module-level function or class, or a ``functools.partial`` of one; not a lambda); workers start by
``forkserver`` (``spawn`` where there is none), never ``fork``, since this process has JAX threads. Data goes
through one shared memory block (observations, actions, rewards, flags); the pipes carry only env ids, never
pickles. ``recv`` returns the first ``batch_size`` envs to finish (envpool's rule). ``close()`` stops the workers
and frees the block; a worker exits by itself when its parent dies; an env that raises surfaces as one
RuntimeError naming the env, with the worker's traceback.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
import weakref
from collections import deque
from collections.abc import Callable
from multiprocessing import connection, shared_memory
from typing import Any

import numpy as np

from envs.base import require_sync
from envs.episode_stats import EpisodeStats
from envs.python_loop import PythonLoopVecEnv
from envs.subproc_worker import CLOSE, ERROR, RESET, STEP, block_layout, block_views, work
from srljax.types import EnvSpec, TimeStep, spec_from_wire, spec_to_wire

IDLE, IN_FLIGHT, READY = 0, 1, 2  # an env, seen from the parent: returned to the caller / stepping / done
START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
JOIN_S = 5.0


def preload(make_block: Callable[..., Any]) -> list[str]:
    """The worker's module and the one that defines ``make_block`` (a partial's function), unless ``__main__``."""
    module = getattr(getattr(make_block, "func", make_block), "__module__", None)
    worker = work.__module__  # envs.subproc_worker
    return [worker] + ([module] if module and module not in (worker, "__main__") else [])


class SubprocVecEnv:
    """``num_envs`` envs in ``processes`` workers, each a block ``make_block(num_envs=count, seed=seed + first)``."""

    def __init__(
        self,
        make_block: Callable[..., PythonLoopVecEnv],
        num_envs: int,
        seed: int,
        batch_size: int | None = None,
        processes: int | None = None,
    ):
        batch_size = batch_size or num_envs
        if num_envs < 1 or batch_size < 1 or num_envs % batch_size:
            raise ValueError(f"batch_size={batch_size} must divide num_envs={num_envs}")
        processes = min(num_envs, processes or num_envs)  # default one per env: see the module doc
        blocks = np.array_split(np.arange(num_envs), processes)
        self._owner = np.repeat(np.arange(processes), [len(b) for b in blocks])  # env id -> worker
        context = multiprocessing.get_context(START_METHOD)
        if START_METHOD == "forkserver":  # workers fork from a server that imported these once: 16 gymnasium
            context.set_forkserver_preload(preload(make_block))  # workers start in ~0.3 s, not ~4 s as by spawn
        self._conns: list[connection.Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._block: list[shared_memory.SharedMemory] = []  # filled once the spec is known
        self._finalizer = weakref.finalize(self, shut_down, self._procs, self._conns, self._block)
        self._error: RuntimeError | None = None
        for worker, envs in enumerate(blocks):
            ours, theirs = context.Pipe()
            proc = context.Process(target=work, args=(theirs, make_block, int(envs[0]), len(envs), seed, os.getpid()),
                                   name=f"SubprocVecEnv-{worker}", daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(ours)
            self._procs.append(proc)
        self._sentinels = {proc.sentinel: worker for worker, proc in enumerate(self._procs)}
        self._workers = {id(conn): worker for worker, conn in enumerate(self._conns)}
        try:
            specs = [self._startup(worker) for worker in range(processes)]
        except BaseException:
            self.close()
            raise
        self.spec = dataclasses.replace(specs[0], num_envs=num_envs, batch_size=batch_size)
        if any(dataclasses.replace(s, num_envs=num_envs, batch_size=batch_size) != self.spec for s in specs):
            self.close()
            raise ValueError(f"make_block built envs of different spaces in different workers: {specs}")
        self._block.append(shared_memory.SharedMemory(create=True, size=block_layout(self.spec)[1]))
        self._arrays = block_views(self.spec, self._block[0])
        for conn in self._conns:
            conn.send_bytes(json.dumps([self._block[0].name, spec_to_wire(self.spec)]).encode())
        self._state = np.full(num_envs, IDLE, np.int8)
        self._ready: deque[int] = deque()  # READY env ids, in the order they finished
        self._stats = EpisodeStats(num_envs)

    # -- VecEnv ------------------------------------------------------------------------
    @property
    def is_async(self) -> bool:
        return self.spec.batch_size < self.spec.num_envs

    @property
    def processes(self) -> int:
        return len(self._procs)

    def reset(self) -> TimeStep:
        require_sync(self.spec, "reset")
        self._restart()
        return self._gather(self._all_ids())

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        require_sync(self.spec, "step")
        ids = self._all_ids() if env_id is None else np.asarray(env_id, np.int32)
        self.send(action, ids)
        return self._gather(ids)

    def async_reset(self) -> None:
        self._restart()

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        self._check()
        ids = np.asarray(env_id, np.int32)
        if len(action) != len(ids):
            raise ValueError(f"{len(action)} actions for {len(ids)} env ids")
        busy = ids[self._state[ids] != IDLE]
        if len(busy) or len(np.unique(ids)) < len(ids):
            raise ValueError(f"env ids {ids.tolist()}: each must appear once and have been returned by recv "
                             f"(envs {busy.tolist()} are stepping or wait to be received)")
        self._arrays["action"][ids] = action
        self._dispatch(STEP, ids)

    def recv(self) -> TimeStep:
        self._check()
        pending = int((self._state != IDLE).sum())
        if pending < self.spec.batch_size:
            raise RuntimeError(f"recv() waits for {self.spec.batch_size} envs but {pending} are stepping: call "
                               "async_reset() or send() first")
        while len(self._ready) < self.spec.batch_size:
            self._pump()
        ids = np.array([self._ready.popleft() for _ in range(self.spec.batch_size)], np.int32)
        return self._timestep(ids)

    def close(self) -> None:
        self._finalizer()

    # -- internals ---------------------------------------------------------------------
    def _all_ids(self) -> np.ndarray:
        return np.arange(self.spec.num_envs, dtype=np.int32)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._finalizer.alive:
            raise RuntimeError("this SubprocVecEnv is closed")

    def _restart(self) -> None:
        """Wait out the envs still stepping, forget every result, and reset every env (rows come as READY)."""
        self._check()
        while (self._state == IN_FLIGHT).any():
            self._pump()
        self._ready.clear()
        self._stats.begin()
        self._dispatch(RESET, self._all_ids())

    def _dispatch(self, command: bytes, ids: np.ndarray) -> None:
        self._state[ids] = IN_FLIGHT
        owners = self._owner[ids]
        for worker in np.unique(owners).tolist():
            try:
                self._conns[worker].send_bytes(command + ids[owners == worker].tobytes())
            except OSError:
                self._pump()  # the worker is gone: raise what it said, or that it died
                raise self._fail(f"worker {worker} is gone") from None

    def _gather(self, ids: np.ndarray) -> TimeStep:
        """Wait for exactly the envs ``ids``; their rows in that order."""
        while (self._state[ids] != READY).any():
            self._pump()
        wanted = set(ids.tolist())
        self._ready = deque(i for i in self._ready if i not in wanted)
        return self._timestep(ids)

    def _pump(self) -> None:
        """Wait for at least one worker message (or death), then read all that arrived."""
        for obj in connection.wait([*self._conns, *self._sentinels]):
            worker = self._sentinels[obj] if isinstance(obj, int) else self._workers[id(obj)]
            if not self._drain(worker) or isinstance(obj, int):  # an error report comes before an exit
                self._procs[worker].join(1.0)
                raise self._fail(f"worker process {worker} ({self._describe(worker)}) exited with code "
                                 f"{self._procs[worker].exitcode}")

    def _drain(self, worker: int) -> bool:
        """Read the worker's messages; False if its pipe closed (it died)."""
        conn = self._conns[worker]
        try:
            while conn.poll():
                message = conn.recv_bytes()
                if message[:1] == ERROR:
                    raise self._fail(message[1:].decode(errors="replace"))
                ids = np.frombuffer(message, np.int32, offset=1)
                self._state[ids] = READY
                self._ready.extend(ids.tolist())
        except (EOFError, OSError):
            return False
        return True

    def _fail(self, text: str) -> RuntimeError:
        if self._error is None:
            self._error = RuntimeError(f"SubprocVecEnv({self.spec.id if hasattr(self, 'spec') else '?'}): {text}")
        return self._error

    def _describe(self, worker: int) -> str:
        envs = np.flatnonzero(self._owner == worker)
        return f"envs {envs[0]}..{envs[-1]}"

    def _startup(self, worker: int) -> EnvSpec:
        conn, proc = self._conns[worker], self._procs[worker]
        while not conn.poll():
            connection.wait([conn, proc.sentinel])
            if not conn.poll() and not proc.is_alive():
                raise self._fail(f"worker process {worker} ({self._describe(worker)}) exited with code "
                                 f"{proc.exitcode} while building its envs")
        message = conn.recv_bytes()
        if message[:1] == ERROR:
            raise self._fail(message[1:].decode(errors="replace"))
        return spec_from_wire(json.loads(message[1:]))

    def _timestep(self, ids: np.ndarray) -> TimeStep:
        self._state[ids] = IDLE
        raw_reward = self._arrays["reward"][ids]
        terminated = self._arrays["terminated"][ids]
        truncated = self._arrays["truncated"][ids]
        done = terminated | truncated
        episode_return, episode_length = self._stats.update(ids, raw_reward, done, game_over=done)
        return TimeStep(
            obs=self._arrays["obs"][ids],  # fancy indexing copies: the worker may overwrite the row next
            reward=raw_reward.astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            env_id=ids,
            episode_return=episode_return,
            episode_length=episode_length,
        )


def shut_down(procs: list, conns: list, block: list) -> None:
    """Stop and join the workers, then free the block (``SubprocVecEnv.close``; safe to run once only)."""
    for conn in conns:
        try:
            conn.send_bytes(CLOSE)
        except OSError:
            pass
    deadline = time.monotonic() + JOIN_S
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for conn in conns:
        conn.close()
    for shm in block:
        shm.close()
        shm.unlink()
