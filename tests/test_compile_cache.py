"""JAX's persistent compilation cache (``srljax/parallel/compile_cache.py``): on by default, a folder per JAX version,
``compile_cache=off`` or a folder; each case runs in a fresh process (JAX sets its cache up once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax

from srljax.config import Experiment, problems
from srljax.parallel import compile_cache

ROOT = Path(__file__).resolve().parents[1]
JIT = ("import sys, jax, jax.numpy as jnp; from srljax.parallel import compile_cache; "
       "print(compile_cache.enable(sys.argv[1])); print(float(jax.jit(lambda x: jnp.sin(x) * 3 + 1)(jnp.ones(5)).sum()))")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def test_folder_is_written_once_and_read_back(tmp_path):
    folder = tmp_path / "cache"
    first = run("-c", JIT, str(folder))
    written = files(folder)
    assert first.stdout.splitlines()[0] == str(folder) and written, first.stdout
    second = run("-c", JIT, str(folder))
    assert files(folder) == written and second.stdout.splitlines()[1] == first.stdout.splitlines()[1]


def test_off_writes_nothing_even_where_jax_would(tmp_path):
    """A user's exported cache folder: ``auto`` uses it, ``off`` does not write there."""
    exported = tmp_path / "exported"
    env = {"JAX_COMPILATION_CACHE_DIR": str(exported), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    out = run("-c", JIT, "off", env=env)
    assert out.stdout.splitlines()[0] == "None" and not files(exported)
    run("-c", JIT, "auto", env=env)
    assert files(exported)


def test_auto_is_the_exported_folder_or_one_per_jax_version(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    assert compile_cache.cache_dir("auto") == tmp_path / "mine"
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    auto = compile_cache.cache_dir("auto")
    assert auto.parent == tmp_path / "xdg" / "srljax" and auto.name.startswith(f"jax-{jax.__version__}-")
    assert Experiment().compile_cache == "auto"


def test_a_file_or_empty_name_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    found = problems(Experiment(compile_cache=str(tmp_path / "f")))
    assert any("is a file, not a folder" in p for p in found), found
    assert any("compile_cache=''" in p for p in problems(Experiment(compile_cache=" ")))


def test_a_training_run_fills_the_configured_folder(tmp_path):
    """``python -m launch.local`` hands ``compile_cache`` to the loop: the update, act and init programs land there."""
    folder = tmp_path / "cache"
    run("-m", "launch.local", "configs/cartpole_ppo.py", "-e", "cc", "-f", "a", "total_env_steps=2048",
        f"log.run_root={tmp_path / 'runs'}", f"compile_cache={folder}", "log.progress=lines")
    assert len(files(folder)) >= 3, files(folder)
