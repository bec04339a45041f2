"""A config dataclass from its ``dataclasses.asdict`` form (the JSON every worker receives)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from srljax.config.algo import algo_config_class


def build(data: dict[str, Any], cls: type) -> Any:
    """``cls(**data)`` with nested sections rebuilt; an ``algo`` field's class is chosen by its ``name``."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, hint = data[f.name], hints[f.name]
        if f.name == "algo" and isinstance(value, dict):
            hint = algo_config_class(value.get("name", "ppo"))
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = build(value, hint)
        elif typing.get_origin(hint) is tuple:
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)
