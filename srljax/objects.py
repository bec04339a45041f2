"""Config values that name code (``"package.module:name"``): ``env.factory``, ``layout.custom_roles``.

    make_env = load_object("my_pkg.envs:make_env", "env.factory")   # ValueError naming the key if it does not import
"""

from __future__ import annotations

import importlib
from typing import Any


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
