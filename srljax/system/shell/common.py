"""What the workers share: trial and name keys, bind addresses, the env spec, checks on incoming trees.

    trial_name(cfg)                          # "cartpole/t0": the trial every message is stamped with
    spec_to_wire(spec), spec_from_wire(d)    # the env spec in the configure message
    stream_key(cfg, "trainer", 0, "samples") # "cartpole/t0/trainer/0/samples": where it is registered
    bind_address(cfg)                        # "tcp://127.0.0.1:*" or "ipc://*"
    traj = checked_trajectory(msg.tree, spec, num_steps, extras_spec)   # ValueError if it does not fit

A message that passes the codec can still carry a tree of the wrong shape (a foreign or buggy
peer); the checks here turn that into a counted drop instead of a crash inside ``jit``. Floats
must be finite: one NaN in a batch would turn the params into NaN at the next update.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from srljax.comm import worker_key
from srljax.comm.hosts import bind_host
from srljax.config import Experiment
from srljax.types import EnvSpec, Trajectory, spec_from_wire, spec_to_wire  # noqa: F401 - re-exported


def trial_name(cfg: Experiment) -> str:
    return f"{cfg.name}/{cfg.trial}"


def stream_key(cfg: Experiment, role: str, index: int, stream: str) -> str:
    """Name key of the socket ``role/index`` binds for ``stream`` (samples, params, inference, control)."""
    return f"{worker_key(cfg.name, cfg.trial, role, index)}/{stream}"


def bind_address(cfg: Experiment) -> str:
    """Loopback by default: local runs must not listen on the network. Multi-node backends
    (``launch/slurm/task.py``) set ``$SRLJAX_BIND_HOST`` to the node's cluster address."""
    if cfg.layout.transport == "ipc":
        return "ipc://*"
    return f"tcp://{bind_host()}:*"


def env_spec(cfg: Experiment) -> EnvSpec:
    """The spec of one actor's envs, read from a throw-away single env: the controller does this once
    and sends it to every worker in ``configure`` (``spec_to_wire``)."""
    import envs

    probe = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=0), seed=cfg.seed)
    try:
        spec = probe.spec
    finally:
        probe.close()
    return dataclasses.replace(spec, num_envs=cfg.env.num_envs, batch_size=cfg.env.envs_per_recv)


def check_array(name: str, x: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} is {type(x).__name__}, not an array")
    if x.shape != shape or x.dtype != np.dtype(dtype):
        raise ValueError(f"{name} is {x.dtype}{list(x.shape)}, expected {dtype}{list(shape)}")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or infinity")
    return x


def checked_obs(obs: Any, spec: EnvSpec, max_rows: int) -> np.ndarray:
    """``obs`` [n, *O] of the env's dtype with 0 <= n <= max_rows, else ValueError."""
    if not isinstance(obs, np.ndarray) or obs.ndim < 1 or not 0 <= obs.shape[0] <= max_rows:
        raise ValueError(f"observation batch must be [0..{max_rows}, *{spec.obs_shape}]")
    return check_array("obs", obs, (obs.shape[0], *spec.obs_shape), spec.obs_dtype)


def checked_trajectory(tree: Any, spec: EnvSpec, num_steps: int,
                       extras_spec: Mapping[str, tuple[tuple[int, ...], str]]) -> Trajectory:
    """A ``Trajectory`` [T+1, B] from a received tree (NamedTuple or dict of its fields), or ValueError."""
    fields = tree._asdict() if isinstance(tree, Trajectory) else tree
    if not isinstance(fields, dict) or set(fields) != set(Trajectory._fields):
        raise ValueError("not a Trajectory")
    reward = fields["reward"]
    if not isinstance(reward, np.ndarray) or reward.ndim != 2 or reward.shape[1] < 1:
        raise ValueError("reward must be [T+1, B]")
    rows, b = num_steps + 1, reward.shape[1]
    extras = fields["extras"]
    if not isinstance(extras, dict) or set(extras) != set(extras_spec):
        raise ValueError(f"extras must be {sorted(extras_spec)}")
    return Trajectory(
        obs=check_array("obs", fields["obs"], (rows, b, *spec.obs_shape), spec.obs_dtype),
        action=check_array("action", fields["action"], (rows, b, *spec.action_shape), spec.action_dtype),
        reward=check_array("reward", reward, (rows, b), "float32"),
        terminated=check_array("terminated", fields["terminated"], (rows, b), "bool"),
        truncated=check_array("truncated", fields["truncated"], (rows, b), "bool"),
        extras={k: check_array(k, extras[k], (rows, b, *shape), dtype) for k, (shape, dtype) in extras_spec.items()},
        policy_version=check_array("policy_version", fields["policy_version"], (b,), "int32"),
    )


def episode_meta(returns: list[float], lengths: list[int], wins: list[float] | None = None
                 ) -> dict[str, list[float] | list[int]]:
    """Completed games travel in a segment's ``meta`` so the trainer can log true returns; ``wins``: the outcomes
    (1.0 won, 0.0 not) of the games whose env reports one (a JAX env's ``episode_won``, SMAX), for ``win_rate``."""
    out: dict[str, list[float] | list[int]] = {"episode_returns": [float(r) for r in returns],
                                               "episode_lengths": [int(n) for n in lengths]}
    if wins:
        out["episode_wins"] = [float(w) for w in wins]
    return out


def wins_from_meta(meta: Mapping[str, Any], max_count: int | None = None) -> np.ndarray:
    """The ``episode_wins`` of ``episode_meta`` (1.0 / 0.0 each); malformed, out of range or more than ``max_count``:
    none."""
    none = np.zeros(0, np.float32)
    try:
        wins = np.asarray(meta.get("episode_wins", []), np.float32)
    except (TypeError, ValueError, OverflowError):
        return none
    if wins.ndim != 1 or (max_count is not None and wins.size > max_count) or not np.isin(wins, (0.0, 1.0)).all():
        return none
    return wins


def episodes_from_meta(meta: Mapping[str, Any], max_count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``episode_meta``; anything malformed or out of range counts as no episodes: returns must
    be finite, lengths >= 1, and at most ``max_count`` episodes (a segment's env steps: each ends one at most)."""
    none = np.zeros(0, np.float32), np.zeros(0, np.int64)
    returns, lengths = meta.get("episode_returns", []), meta.get("episode_lengths", [])
    try:
        r, n = np.asarray(returns, np.float32), np.asarray(lengths, np.int64)
    except (TypeError, ValueError, OverflowError):
        return none
    if r.ndim != 1 or r.shape != n.shape or (max_count is not None and r.size > max_count):
        return none
    if not (np.isfinite(r).all() and (n >= 1).all()):
        return none
    return r, n


class BackgroundCall:
    """One call at a time on a daemon thread, collected by the worker's main loop (which keeps turning and
    heartbeating meanwhile): ``start(fn, *args, tag=...)``, then ``take()`` each loop: None while nothing has
    finished, else ``(tag, fn's result)``; an error in ``fn`` is re-raised by ``take`` (the controller sees it)."""

    def __init__(self, name: str, what: str = "evaluation") -> None:
        self.name, self.what = name, what
        self._thread: threading.Thread | None = None
        self._tag: Any = None
        self._result: Any = None
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def start(self, fn: Callable[..., Any], *args: Any, tag: Any = None) -> None:
        assert self._thread is None, "one call at a time"
        self._tag, self._result, self._error = tag, None, None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=self.name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self._result = fn(*args)
        except BaseException as error:  # re-raised in the main loop by take()
            self._error = error

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def take(self) -> tuple[Any, Any] | None:
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread = None
        if self._error is not None:
            raise RuntimeError(f"{self.what} failed") from self._error
        out = (self._tag, self._result)
        self._tag = self._result = None
        return out
