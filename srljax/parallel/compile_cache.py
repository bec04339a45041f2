"""JAX's persistent compilation cache, on by default: a second run of a config skips its compiles.

    compile_cache.enable(cfg.compile_cache)   # every process that compiles: the single-process loops,
                                              # each worker process, the threads backend, launch.play

``compile_cache`` (a root key of ``Experiment``) is ``auto`` (the default: ``$JAX_COMPILATION_CACHE_DIR``
if the user exported one, else ``~/.cache/srljax/jax-<jax version>-<environment>``, under ``$XDG_CACHE_HOME``
if set, ``<environment>`` a hash of the Python environment's path, so two venvs keep apart),
``off``, or a folder. Every process of a run points at the same folder, so a distributed run's workers
share it (on Slurm, a folder on the shared filesystem: set ``compile_cache=/shared/path``). JAX keys each
entry by the program, its devices, compile options and JAX/XLA versions, so a stale entry is never
used; the version and environment in the folder name only keep entries apart for deletion.

Every program is written (``MIN_COMPILE_S`` = 0; JAX's default of 1 s skips every compile of a small
network on a CPU, which is where the first run of ``configs/cartpole_ppo.py`` spends its start-up: 9
entries, ~10 s to the first metrics line cold, ~6 s warm, most of the rest importing JAX;
``bench/compile_once.py``). The cache holds only what runs compiled; delete the folder to reclaim it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

MIN_COMPILE_S = 0.0
"""programs compiled faster than this are not written."""

_enabled: str | None = None


def cache_dir(setting: str) -> Path | None:
    """The folder ``compile_cache=setting`` names, or None for ``off``."""
    if setting == "off":
        return None
    if setting != "auto":
        return Path(setting).expanduser()
    if exported := os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(exported)
    import jax

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    env = hashlib.sha1(sys.prefix.encode()).hexdigest()[:8]  # one Python environment's builds apart from another's
    return base / "srljax" / f"jax-{jax.__version__}-{env}"


def enable(setting: str) -> Path | None:
    """Point this process's JAX at the cache folder (created if missing); returns it, None if off.
    Call before the first compile; a second call with the same setting does nothing. A folder that
    cannot be created turns the cache off with a warning: a run never fails for its cache."""
    global _enabled
    if _enabled == setting:
        return cache_dir(setting)
    import jax

    path = cache_dir(setting)
    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        _enabled = setting
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"compile_cache: cannot create {path} ({err}); compiling without a persistent cache", flush=True)
        jax.config.update("jax_enable_compilation_cache", False)
        _enabled = setting
        return None
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    _enabled = setting
    return path
