"""What the workers share: trial and name keys, bind addresses, the env spec, checks on incoming trees.

    trial_name(cfg)                          # "cartpole/t0": the trial every message is stamped with
    stream_key(cfg, "trainer", 0, "samples") # "cartpole/t0/trainer/0/samples": where it is registered
    bind_address(cfg)                        # "tcp://127.0.0.1:*" or "ipc://*"
    traj = checked_trajectory(msg.tree, spec, num_steps, extras_spec)   # ValueError if it does not fit

A message that passes the codec can still carry a tree of the wrong shape (a foreign or buggy
peer); the checks here turn that into a counted drop instead of a crash inside ``jit``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from srljax.comm import worker_key
from srljax.config import Experiment
from srljax.types import EnvSpec, Trajectory

CONTROLLER = "controller"


def trial_name(cfg: Experiment) -> str:
    return f"{cfg.name}/{cfg.trial}"


def stream_key(cfg: Experiment, role: str, index: int, stream: str) -> str:
    """Name key of the socket ``role/index`` binds for ``stream`` (samples, params, inference, control)."""
    return f"{worker_key(cfg.name, cfg.trial, role, index)}/{stream}"


def params_prefix(cfg: Experiment) -> str:
    """Every params publisher registers under this prefix; subscribers connect to all of them."""
    return f"{cfg.name}/{cfg.trial}/params/"


def bind_address(cfg: Experiment) -> str:
    """Loopback only: local runs must not listen on the network."""
    return "ipc://*" if cfg.layout.transport == "ipc" else "tcp://127.0.0.1:*"


def env_spec(cfg: Experiment) -> EnvSpec:
    """The spec of one actor's envs, read from a throw-away single env (trainer and policy workers own none)."""
    import envs

    probe = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=0), seed=cfg.seed)
    try:
        spec = probe.spec
    finally:
        probe.close()
    return dataclasses.replace(spec, num_envs=cfg.env.num_envs, batch_size=cfg.env.envs_per_recv)


def _check(name: str, x: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} is {type(x).__name__}, not an array")
    if x.shape != shape or x.dtype != np.dtype(dtype):
        raise ValueError(f"{name} is {x.dtype}{list(x.shape)}, expected {dtype}{list(shape)}")
    return x


def checked_obs(obs: Any, spec: EnvSpec, max_rows: int) -> np.ndarray:
    """``obs`` [n, *O] of the env's dtype with 1 <= n <= max_rows, else ValueError."""
    if not isinstance(obs, np.ndarray) or obs.ndim < 1 or not 1 <= obs.shape[0] <= max_rows:
        raise ValueError(f"observation batch must be [1..{max_rows}, *{spec.obs_shape}]")
    return _check("obs", obs, (obs.shape[0], *spec.obs_shape), spec.obs_dtype)


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
        obs=_check("obs", fields["obs"], (rows, b, *spec.obs_shape), spec.obs_dtype),
        action=_check("action", fields["action"], (rows, b, *spec.action_shape), spec.action_dtype),
        reward=_check("reward", reward, (rows, b), "float32"),
        terminated=_check("terminated", fields["terminated"], (rows, b), "bool"),
        truncated=_check("truncated", fields["truncated"], (rows, b), "bool"),
        extras={k: _check(k, extras[k], (rows, b, *shape), dtype) for k, (shape, dtype) in extras_spec.items()},
        policy_version=_check("policy_version", fields["policy_version"], (b,), "int32"),
    )


def episode_meta(returns: list[float], lengths: list[int]) -> dict[str, list[float] | list[int]]:
    """Completed games travel in a segment's ``meta`` so the trainer can log true returns."""
    return {"episode_returns": [float(r) for r in returns], "episode_lengths": [int(n) for n in lengths]}


def episodes_from_meta(meta: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``episode_meta``; anything malformed counts as no episodes."""
    returns, lengths = meta.get("episode_returns", []), meta.get("episode_lengths", [])
    try:
        r, n = np.asarray(returns, np.float32), np.asarray(lengths, np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    if r.ndim != 1 or r.shape != n.shape:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    return r, n


class ParamsCodec:
    """Policy params <-> a flat list of arrays on the wire, checked against the algorithm's own structure.

        codec = ParamsCodec(algo)
        publisher.publish(version, codec.to_wire(learner.policy_params()))    # trainer
        params = codec.from_wire(got.tree)                                    # actor / policy worker

    The params pytree holds flax dataclasses (normaliser stats) the codec does not carry, so
    only the leaves travel; the receiver rebuilds the tree from ``jax.eval_shape`` of its own
    ``algo.init`` (no compute, no allocation) and refuses leaves of the wrong shape or dtype.
    """

    def __init__(self, algo: Any):
        import jax

        shapes = jax.eval_shape(lambda key: algo.policy_params(algo.init(key)), jax.random.PRNGKey(0))
        leaves, self.treedef = jax.tree.flatten(shapes)
        self.specs = [(tuple(x.shape), np.dtype(x.dtype)) for x in leaves]

    def to_wire(self, params: Any) -> list[np.ndarray]:
        import jax

        return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(params))]

    def from_wire(self, tree: Any) -> Any:
        """The params pytree (numpy leaves), or ValueError if ``tree`` does not match."""
        import jax

        if not isinstance(tree, list) or len(tree) != len(self.specs):
            raise ValueError(f"params must be a list of {len(self.specs)} arrays")
        for i, (x, (shape, dtype)) in enumerate(zip(tree, self.specs)):
            _check(f"params leaf {i}", x, shape, dtype.name)
        return jax.tree.unflatten(self.treedef, tree)


CHECK_PARAMS_S = 0.005


class ParamsFollower:
    """A SUB to every params publisher of the trial, keeping the newest valid params on this device.

        follower = ParamsFollower(cfg, names, ParamsCodec(algo), stats)
        if follower.poll(timeout_ms=0):      # True when a newer version arrived
            params, version = follower.params, follower.version
    """

    def __init__(self, cfg: Experiment, names: Any, codec: ParamsCodec, stats: Any, ctx: Any = None):
        from srljax.comm import ParamsSubscriber

        self.sub = ParamsSubscriber(None, trial_name(cfg), ctx=ctx)
        publishers = names.list(params_prefix(cfg))
        if not publishers:
            raise RuntimeError(f"no params publisher registered under {params_prefix(cfg)!r}")
        for address in publishers.values():
            self.sub.connect(address)
        self.codec, self.stats = codec, stats
        self.params: Any = None
        self.version = -1
        self._next_check = 0.0

    def poll(self, timeout_ms: int = 0) -> bool:
        import time

        import jax

        now = time.monotonic()
        if self.params is not None and timeout_ms == 0 and now < self._next_check:
            return False  # callers poll per env batch; a syscall each time is not worth it
        self._next_check = now + CHECK_PARAMS_S
        got = self.sub.poll_newest(timeout_ms=timeout_ms)
        if got is None or got.version <= self.version:
            return False
        try:
            params = self.codec.from_wire(got.tree)
        except ValueError:
            self.stats.add("params_invalid")
            return False
        self.params, self.version = jax.device_put(params), got.version
        self.stats.gauge("policy_version", got.version)
        return True

    def close(self) -> None:
        self.sub.close()


def jit_act(algo: Any) -> Any:
    """``act(params, obs, actor_state, key) -> (action, extras, actor_state, next_key)``, jitted.

    The key is split inside the compiled call: an eager ``jax.random.split`` per batch costs
    about as much as the small policy networks themselves.
    """
    import jax

    def act(params: Any, obs: Any, actor_state: Any, key: Any) -> Any:
        key, act_key = jax.random.split(key)
        action, extras, actor_state = algo.act(params, obs, actor_state, act_key)
        return action, extras, actor_state, key

    return jax.jit(act)
