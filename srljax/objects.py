"""Config values that name code (``"package.module:name"``): ``env.factory``, ``layout.custom_roles``.

    make_env = load_object("my_pkg.envs:make_env", "env.factory")   # ValueError naming the key if it does not import
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any


class FileCallError(ValueError):
    """A config or sweep file that is missing or lacks its function; the message names the fix."""


def call_file(path: str | Path, function: str, kind: str, returns: type, signature: str, example: str,
              expected: str) -> Any:
    """Import the Python file ``path`` and return ``function()``'s result, checked to be a ``returns``.

    ``kind`` ("config", "sweep") and ``example`` (a shipped file) go into the messages, with
    ``signature`` (what the file must define, in backticks: the experiment() function) and
    ``expected`` (the type's public name)."""
    path = Path(path)
    if not path.is_file():
        raise FileCallError(f"{kind} file {str(path)!r} not found (try {example})")
    try:  # a file that exits (sys.exit(0) while importing or building) would end the launcher having run nothing
        module = import_file(path, kind)
        if not callable(getattr(module, function, None)):
            raise FileCallError(f"{path} must define {signature}")
        value = getattr(module, function)()
    except SystemExit as exit_:
        raise FileCallError(f"{kind} file {path} called sys.exit({exit_.code!r}) while it was loaded; a {kind} file "
                            f"must define {signature} and return, not exit") from None
    if not isinstance(value, returns):
        raise FileCallError(f"{path}: {function}() returned {type(value).__name__}, expected {expected}")
    return value


def import_file(path: str | Path, kind: str) -> Any:
    """Import the Python file ``path`` as a fresh module (named ``srljax_<kind>_<stem>``) and return it."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"srljax_{kind}_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_object(path: str, key: str) -> Any:
    """The object a config value ``"package.module:name"`` names (``env.factory``, ``layout.custom_roles``),
    imported now; ValueError naming ``key``, the value and what is wrong."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{key}={path!r} must look like 'package.module:name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{key}={path!r}: cannot import module {module_name!r} ({error})") from error
    if not hasattr(module, attr):
        raise ValueError(f"{key}={path!r}: module {module_name!r} has no {attr!r}")
    return getattr(module, attr)


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that imports each exported name's module on first use
    (``exports``: name -> the module that defines it), so importing the package costs nothing::

        _EXPORTS = {"train": "srljax.loops.train"}
        __getattr__ = lazy_exports(__name__, _EXPORTS)
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return __getattr__
