"""How big a frame each receiving socket of a trial accepts (``ZMQ_MAXMSGSIZE``), from the config and the env spec.

    control_limits(cfg)                          # before configure: control sockets, PUB/PUSH back channels
    stream_limits(cfg, spec, extras_spec)        # at configure: samples, inference requests and replies
    params_limit(codec.specs)                    # the params subscriber: the largest params leaf

libzmq checks each frame's length as it reads the frame header and drops the connection of a
peer that sends a longer one, before allocating it; the codec then checks the whole message
against its header. A frame is one array of a message (or its msgpack header), so each limit is
the largest array a legitimate message of that stream holds, times ``HEADROOM``, plus ``FLOOR``
for headers and small arrays. The figures are logged by the workers that use them.
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
    request = envs * max(leaves)
    reply = envs * (sum(leaves[1:]) + sum(extras))
    return {"samples": FLOOR + HEADROOM * segment, "requests": FLOOR + HEADROOM * request,
            "replies": FLOOR + HEADROOM * reply}


def params_limit(specs: Iterable[tuple[tuple[int, ...], np.dtype]]) -> int:
    """The params subscriber's bound: the largest leaf of the policy params (``ParamsCodec.specs``)."""
    return FLOOR + HEADROOM * max((_row_bytes(shape, dtype.name) for shape, dtype in specs), default=0)
