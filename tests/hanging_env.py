"""A real envpool env whose ``recv`` / ``step`` blocks forever after a number of calls, in one actor only.

    env.factory="tests.hanging_env:make_env"     # plus, in the environment of the worker processes:
    HANGING_ENV_SEED=5 HANGING_ENV_AFTER=300     # the env made with seed 5 hangs on its 301st recv

Actor ``i`` makes its env with seed ``cfg.seed + i * env.num_envs`` (``srljax/system/acting/actor.py``),
so a seed names one actor; the controller's throw-away spec env (seed ``cfg.seed``, one env) and
every other actor step normally. Without ``HANGING_ENV_SEED`` nothing hangs.

When it hangs it prints ``HANGING_ENV: hanging now (seed S, pid P)`` (to the worker's log under
``launch.local``) and blocks in ``threading.Event().wait()``: the worker's main loop never turns
again while its control thread keeps heartbeating, which is what a wedged C++ env looks like.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from envs.envpool_env import EnvpoolVecEnv
from srljax.config import EnvConfig
from srljax.types import TimeStep

SEED_VAR, AFTER_VAR = "HANGING_ENV_SEED", "HANGING_ENV_AFTER"
MARKER = "HANGING_ENV: hanging now"


class HangingEnv(EnvpoolVecEnv):
    def __init__(self, cfg: EnvConfig, seed: int):
        super().__init__(cfg, seed)
        self.seed = seed
        hang_seed = os.environ.get(SEED_VAR)
        self.hangs = hang_seed is not None and int(hang_seed) == seed
        self.after = int(os.environ.get(AFTER_VAR, "300"))
        self.calls = 0

    def _count(self) -> None:
        self.calls += 1
        if self.hangs and self.calls > self.after:
            print(f"{MARKER} (seed {self.seed}, pid {os.getpid()}, after {self.after} calls)", flush=True)
            threading.Event().wait()  # forever: only SIGKILL (or the end of the process) gets us out

    def recv(self) -> TimeStep:
        self._count()
        return super().recv()

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        self._count()
        return super().step(action, env_id)


def make_env(cfg: EnvConfig, seed: int) -> HangingEnv:
    return HangingEnv(cfg, seed)


STUCK_SEED_VAR = "STUCK_ENV_SEED"


class StuckColumnsEnv(EnvpoolVecEnv):
    """After ``HANGING_ENV_AFTER`` recvs, the env made with seed ``$STUCK_ENV_SEED`` stops reporting
    rows: every ``recv`` returns an empty batch at once (the envs still step, on zero actions), so no
    column of the segment being built ever grows again. The actor's loop keeps turning and its
    heartbeats keep coming, it just never pushes again: a stall, not a hang (an async envpool whose
    envs are all wedged behind a broken one looks so)."""

    def __init__(self, cfg: EnvConfig, seed: int):
        super().__init__(cfg, seed)
        stuck_seed = os.environ.get(STUCK_SEED_VAR)
        self.seed_used = seed
        self.stuck = stuck_seed is not None and int(stuck_seed) == seed
        self.after = int(os.environ.get(AFTER_VAR, "300"))
        self.calls = 0
        self.all_ids: np.ndarray | None = None

    def _hiding(self) -> bool:
        return self.stuck and self.calls > self.after

    def recv(self) -> TimeStep:
        ts = super().recv()
        self.calls += 1
        if not self._hiding():
            return ts
        if self.all_ids is None:
            print(f"STUCK_ENV: columns stop now (seed {self.seed_used}, pid {os.getpid()}, after {self.after} recvs)",
                  flush=True)
        self.all_ids = np.asarray(ts.env_id)
        keep = np.zeros(len(self.all_ids), bool)
        return TimeStep(*(np.asarray(x)[keep] for x in ts))

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        if not self._hiding() or self.all_ids is None:
            return super().send(action, env_id)
        full = np.zeros((len(self.all_ids), *np.shape(action)[1:]), np.asarray(action).dtype)
        full[np.isin(self.all_ids, env_id)] = action
        return super().send(full, self.all_ids)


def make_stuck_env(cfg: EnvConfig, seed: int) -> StuckColumnsEnv:
    return StuckColumnsEnv(cfg, seed)
