"""Communication layer: wire codec, name resolution and every ZMQ stream's endpoints (the five below, PBT's
directives and the league's results). No pickle anywhere.

    names = DirectoryNames(cfg.run_dir / "names")
    rx = SampleReceiver("tcp://127.0.0.1:*", trial="exp/t0")
    names.add(worker_key("exp", "t0", "buffer", 0), rx.address, ttl=30)
    tx = SampleSender(names.wait("exp/t0/buffer/0", timeout=60), trial="exp/t0")

=========  ==============================  =================================  ==================
stream     server side (binds)             client side (connects)             semantics
=========  ==============================  =================================  ==================
inference  InferenceServer (ROUTER)        InferenceClient (DEALER)           request/reply by id
samples    SampleReceiver (PULL)           SampleSender (PUSH)                bounded, backpressure
params     ParamsPublisher (PUB)           ParamsSubscriber (SUB)             lossy, newest wins
control    ControlServer (ROUTER)          ControlClient (DEALER)             small msgpack commands
priorities PriorityReceiver (PULL)         PrioritySender (PUSH, per shard)   lossy, replay only
directives DirectiveReceiver (PULL)        DirectiveSender (PUSH)             PBT manager -> a member
results    ResultsReceiver (PULL)          ResultsSender (PUSH)               league actors -> manager
=========  ==============================  =================================  ==================

Each stream owns one socket (one thread; ``close()`` or ``with``); bad, foreign-trial or wrong-schema messages
are dropped and counted per reason (``endpoint.counters()``), never raised. Modules: ``codec.py``,
``sockets.py``, one per stream (``inference.py``, ``samples.py``, ``params.py``, ``control.py``,
``priorities.py``, ``directives.py``, ``results.py``; samples through shared memory on one host, ``shm.py``; the last two on one generic meta-only PUSH/PULL pair,
``meta_stream.py``), ``names.py`` and ``served_names.py``, ``hosts.py`` (bind
addresses), ``security.py`` (CURVE, receive bounds), ``doorbell.py``.
"""

from srljax.comm.codec import (
    SCHEMA_VERSION,
    WIRE_DTYPES,
    DecodeError,
    DropCounter,
    Message,
    decode,
    encode,
    register_namedtuple,
)
from srljax.comm.control import TO_CONTROLLER, TO_WORKER, ControlClient, ControlMessage, ControlServer
from srljax.comm.inference import InferenceClient, InferenceServer, Reply, Request
from srljax.comm.names import DirectoryNames, MemoryNames, NameExists, NameNotFound, NameResolver, worker_key
from srljax.comm.params import Params, ParamsPublisher, ParamsSubscriber
from srljax.comm.priorities import PriorityReceiver, PrioritySender, PriorityUpdate
from srljax.comm.samples import SampleReceiver, SampleSender
from srljax.comm.sockets import Endpoint, bind, bind_random, make_socket

__all__ = [
    "SCHEMA_VERSION", "WIRE_DTYPES", "DecodeError", "DropCounter", "Message", "decode", "encode",
    "register_namedtuple", "TO_CONTROLLER", "TO_WORKER", "ControlClient", "ControlMessage", "ControlServer",
    "InferenceClient", "InferenceServer", "Reply", "Request", "DirectoryNames", "MemoryNames", "NameExists",
    "NameNotFound", "NameResolver", "worker_key", "Params", "ParamsPublisher", "ParamsSubscriber",
    "SampleReceiver", "SampleSender", "Endpoint", "bind", "bind_random", "make_socket",
    "PriorityReceiver", "PrioritySender", "PriorityUpdate",
]
