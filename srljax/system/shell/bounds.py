"""How big a frame (``ZMQ_MAXMSGSIZE``) and a whole message each receiving socket of a trial accepts, from the
config and the env spec.

    control_limits(cfg)                          # before configure: control sockets, PUB/PUSH back channels
    stream_limits(cfg, spec, extras_spec)        # at configure: samples, inference requests and replies
    stream_message_limits(cfg, spec, extras_spec)  # the same streams' whole messages, all frames together
    params_limit(codec.specs)                    # the params subscriber: the largest params leaf
    params_message_limit(codec.specs)            # ... and all of them (one params message)

libzmq checks each frame's length as it reads the frame header and drops the connection of a
peer that sends a longer one, before allocating it; the codec then checks the whole message
against its header. A frame is one array of a message (or its msgpack header), so each limit is
the largest array a legitimate message of that stream holds, times ``HEADROOM``, plus ``FLOOR``
for headers and small arrays. The figures are logged by the workers that use them.

A frame bound alone does not bound a message: a peer holding a trial key could send 14,000 frames
each under it. So every receiving socket also bounds the sum of a message's frames
(``srljax.comm.sockets.Endpoint``): the stream's largest legitimate message times ``HEADROOM``
plus ``FLOOR`` (a control message is one frame: its frame bound), capped by ``layout.max_message_bytes``
where that is set; a cap below a data stream's largest message is refused at configure
(``check_message_cap``), since every such message would be dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from srljax.config import Experiment
from srljax.types import EnvSpec

FLOOR = 64 << 10  # headers, tags and small arrays; also the bound on sockets that take nothing in
HEADROOM = 2
CONTROLLER_IN = 256 << 10  # heartbeats, status (an error's traceback is cut to 4,000 chars), ready addresses
COMMANDS_PER_WORKER = 1 << 10  # a configure message names every peer's addresses
EPISODE_META_BYTES = 16  # one completed episode's return and length in a segment's msgpack header


def _row_bytes(shape: Iterable[int], dtype: str) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def control_limits(cfg: Experiment) -> dict[str, int]:
    """Limits known before ``configure``: what the controller and workers say to each other, and the
    back channels of sockets that only send (PUB subscriptions; a PUSH takes nothing)."""
    from srljax.layout import build_layout

    workers = len(build_layout(cfg).workers())
    return {"control": CONTROLLER_IN, "commands": 4 * FLOOR + COMMANDS_PER_WORKER * workers, "subscriptions": FLOOR}


def stream_limits(cfg: Experiment, spec: EnvSpec,
                  extras_spec: Mapping[str, tuple[tuple[int, ...], str]]) -> dict[str, int]:
    """``samples``: a segment ``[T+1, columns]`` (an actor's ``env.num_envs`` or a buffer's share of
    a batch); ``requests``: one actor's observations (``env.num_envs`` rows) and tags; ``replies``:
    the packed action and extras of those rows."""
    leaves = [_row_bytes(spec.obs_shape, spec.obs_dtype), _row_bytes(spec.action_shape, spec.action_dtype), 8]
    extras = [_row_bytes(shape, dtype) for shape, dtype in extras_spec.values()]
    rows, columns, envs = cfg.algo.num_steps + 1, max(cfg.env.num_envs, cfg.batch_envs), cfg.env.num_envs
    segment = rows * columns * max(leaves + extras + [EPISODE_META_BYTES])
    request = envs * max(leaves + [_served_row(cfg, spec)])
    reply = envs * (sum(leaves[1:]) + sum(extras))
    return {"samples": FLOOR + HEADROOM * segment, "requests": FLOOR + HEADROOM * request,
            "replies": FLOOR + HEADROOM * reply}


def _served_row(cfg: Experiment, spec: EnvSpec) -> int:
    """Several policies with remote ones: a request row is those policies' agents' rows (``served_spec``), which
    may outgrow the env's own row (each carries the whole env's state); 0 otherwise."""
    if not cfg.policies.enabled or spec.num_agents != len(cfg.policies.agents):
        return 0
    from algos.multi_policy import served_spec
    from srljax.config.policies import inference_of

    remote = tuple(name for name, how in inference_of(cfg).items() if how == "remote")
    rows = served_spec(cfg, spec, remote) if remote else None
    return _row_bytes(rows.obs_shape, rows.obs_dtype) if rows is not None else 0


def _segment_row(spec: EnvSpec, extras_spec: Mapping[str, tuple[tuple[int, ...], str]]) -> int:
    """All of one segment row's leaves: observation, action, reward and two flags, the extras, episode meta."""
    return (_row_bytes(spec.obs_shape, spec.obs_dtype) + _row_bytes(spec.action_shape, spec.action_dtype) + 3 * 8
            + sum(_row_bytes(shape, dtype) for shape, dtype in extras_spec.values()) + EPISODE_META_BYTES)


def largest_messages(cfg: Experiment, spec: EnvSpec,
                     extras_spec: Mapping[str, tuple[tuple[int, ...], str]]) -> dict[str, int]:
    """The largest legitimate message of each data stream, in bytes, all its leaves together (no headroom)."""
    leaves = [_row_bytes(spec.obs_shape, spec.obs_dtype), _row_bytes(spec.action_shape, spec.action_dtype), 8]
    extras = sum(_row_bytes(shape, dtype) for shape, dtype in extras_spec.values())
    rows, columns, envs = cfg.algo.num_steps + 1, max(cfg.env.num_envs, cfg.batch_envs), cfg.env.num_envs
    return {"samples": rows * columns * _segment_row(spec, extras_spec) + 8 * columns,
            "requests": envs * (sum(leaves) + _served_row(cfg, spec)), "replies": envs * (sum(leaves[1:]) + extras)}


def stream_message_limits(cfg: Experiment, spec: EnvSpec,
                          extras_spec: Mapping[str, tuple[tuple[int, ...], str]]) -> dict[str, int]:
    """The whole-message bound of each data stream: ``FLOOR + HEADROOM x`` its largest message."""
    return {key: FLOOR + HEADROOM * size for key, size in largest_messages(cfg, spec, extras_spec).items()}


def check_message_cap(cfg: Experiment, largest: Mapping[str, int]) -> None:
    """``ValueError`` when ``layout.max_message_bytes`` is below the largest message of a stream this worker receives."""
    cap = cfg.layout.max_message_bytes
    over = {stream: size for stream, size in largest.items() if cap and size + FLOOR > cap}
    if over:
        named = ", ".join(f"{stream} {size:,} bytes" for stream, size in sorted(over.items()))
        raise ValueError(f"layout.max_message_bytes={cap:,} is below this trial's largest messages ({named}, plus "
                         f"{FLOOR:,} for headers): every such message would be dropped; raise it, or set 0 "
                         f"(each socket's own bound)")


def params_message_limit(specs: Iterable[tuple[tuple[int, ...], np.dtype]]) -> int:
    """The params subscriber's whole-message bound: every policy params leaf, with headroom."""
    return FLOOR + HEADROOM * sum(_row_bytes(shape, dtype.name) for shape, dtype in specs)


def params_limit(specs: Iterable[tuple[tuple[int, ...], np.dtype]]) -> int:
    """The params subscriber's bound: the largest leaf of the policy params (``ParamsCodec.specs``)."""
    return FLOOR + HEADROOM * max((_row_bytes(shape, dtype.name) for shape, dtype in specs), default=0)
