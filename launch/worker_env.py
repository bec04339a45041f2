"""The environment a worker process of each role starts with, shared by every launcher.

Kept free of JAX imports: launchers must set these variables before any worker imports JAX.

    env = {**os.environ, **task_env("actor", os.environ)}
"""

from __future__ import annotations

from collections.abc import Mapping

# One XLA thread pool for the light roles, so many processes on a few cores do not oversubscribe
# them; the trainer keeps XLA's default (all cores for the update).
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def task_env(role: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set for a ``role`` worker process, given the environment it inherits."""
    out = {"PYTHONUNBUFFERED": "1"}
    if "XLA_PYTHON_CLIENT_PREALLOCATE" not in environ:  # several processes may share one GPU
        out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if role == "actor" and "JAX_PLATFORMS" not in environ:  # inline inference on the actor's CPU, as in SRL
        out["JAX_PLATFORMS"] = "cpu"
    if role in ("actor", "buffer", "policy"):
        out["XLA_FLAGS"] = f"{environ.get('XLA_FLAGS', '')} {SINGLE_THREAD_XLA}".strip()
    return out
