"""How this process's JAX runs programs on the CPU: in the calling thread for the light roles.

    dispatch.run_cpu_inline()   # before the first JAX call of the process (srljax/system/shell/run.py)

JAX's CPU client dispatches every program to a worker thread and returns at once (async dispatch);
the caller blocks later, when it reads the result. For a program of a few microseconds, as an actor's
act call on 16 rows or a policy worker's batch on a small network, that hand-off is most of the
cost: two thread wake-ups per call. Measured on the 2-core box (a 64-64 MLP on 16 rows, one call
every 20 ms as an actor makes them, single-threaded XLA:CPU): 526 us of CPU per call with async
dispatch, 394 us inline; back to back, 138 against 62. So every role but the trainer runs CPU
programs inline, the rule ``srljax/parallel/devices.py`` applies to XLA:CPU's thread pool; the
trainer keeps async dispatch, which lets it receive segments while an update runs. The setting is
read when JAX's CPU backend starts (the process's first JAX computation), and ignored after that.
"""

from __future__ import annotations


def run_cpu_inline() -> None:
    """Run this process's CPU programs in the calling thread (no async dispatch). GPUs are unaffected."""
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)
