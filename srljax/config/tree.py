"""The tree as text: ``key=value`` overrides, config files, JSON.

    cfg = apply_overrides(load_file("configs/cartpole_ppo.py"), ["trainer.lr=1e-4", "algo=impala"])
    write_json(cfg, run_dir / "config.json"); cfg == from_dict(json.load(open(run_dir / "config.json")))
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, Literal

from srljax.config.algo import algo_config_class
from srljax.config.dicts import build
from srljax.config.errors import ConfigError
from srljax.config.experiment import Experiment
from srljax.objects import FileCallError, call_file


def _parse_value(text: str, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError([f"{key}={text!r}: expected a boolean (true/false)"])
    if hint is int:
        try:
            return int(float(text)) if "e" in text.lower() and float(text).is_integer() else int(text.replace("_", ""))
        except ValueError:
            raise ConfigError([f"{key}={text!r}: expected an integer"]) from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError([f"{key}={text!r}: expected a number"]) from None
    if hint is str:
        return text
    if origin is Literal:
        allowed = typing.get_args(hint)
        if text not in allowed:
            raise ConfigError([f"{key}={text!r}: expected one of {', '.join(map(str, allowed))}"])
        return text
    if origin is tuple:
        (item, *_rest) = typing.get_args(hint)
        parts = [p for p in text.strip("()[] ").split(",") if p.strip()]
        return tuple(_parse_value(p.strip(), item, key) for p in parts)
    raise ConfigError([f"{key}: cannot override a field of type {hint} from the command line"])


def apply_overrides(cfg: Any, overrides: list[str] | dict[str, str]) -> Any:
    """``apply_overrides(cfg, ["trainer.lr=1e-4", "env.id=Breakout-v5"])`` -> new frozen tree.

    Unknown keys and bad values are all reported together.
    """
    items = list(overrides.items()) if isinstance(overrides, dict) else overrides
    errors: list[str] = []
    for item in items:
        try:
            key, text = item if isinstance(item, tuple) else _split(item)
            cfg = _set(cfg, key.split("."), text, key)
        except ConfigError as err:
            errors.extend(err.problems)
    if errors:
        raise ConfigError(errors)
    return cfg


def _split(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError([f"override {item!r} is not key=value (e.g. trainer.lr=1e-4)"])
    key, text = item.split("=", 1)
    return key.strip(), text.strip()


def _literal(text: str) -> Any:
    """A free-form option's value: a boolean, an integer, a number, a list of those (``[32,32]``), else the text."""
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_literal(item.strip()) for item in inner.split(",")] if inner else []
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text.replace("_", ""))
        except ValueError:
            pass
    return text


def _set(node: Any, path: list[str], text: str, full_key: str) -> Any:
    hints = typing.get_type_hints(type(node))
    names = [f.name for f in dataclasses.fields(node)]
    head = path[0]
    if head not in names:
        import difflib

        parts = full_key.split(".")
        parent = ".".join(parts[: len(parts) - len(path)])  # the section the key was looked up in
        close = [f"{parent}.{c}" if parent else c for c in difflib.get_close_matches(head, names, n=3)]
        hint = f"; did you mean {', '.join(close)}?" if close else f"; fields here: {', '.join(names)}"
        raise ConfigError([f"unknown config key {full_key!r}{hint}"])
    if len(path) == 1 and isinstance(node, Experiment) and head == "algo":
        return dataclasses.replace(node, algo=algo_config_class(text, full_key)())  # algo=impala
    if len(path) == 1:
        return dataclasses.replace(node, **{head: _parse_value(text, hints[head], full_key)})
    child = getattr(node, head)
    if isinstance(child, dict) and len(path) == 2:  # env.options.NAME=VALUE: the family checks names and types
        return dataclasses.replace(node, **{head: {**child, path[1]: _literal(text)}})
    if not dataclasses.is_dataclass(child):
        raise ConfigError([f"{full_key!r}: {head} is a value, not a section"])
    return dataclasses.replace(node, **{head: _set(child, path[1:], text, full_key)})


def load_file(path: str | Path) -> Experiment:
    """Import a config file and call its ``experiment()``; the name defaults to the file's stem."""
    path = Path(path)
    try:
        cfg = call_file(path, "experiment", "config", Experiment, "`def experiment() -> Experiment`",
                        "configs/cartpole_ppo.py", "srljax.config.Experiment")
    except FileCallError as err:
        raise ConfigError([str(err)]) from None
    if cfg.name == Experiment.name:
        cfg = dataclasses.replace(cfg, name=path.stem)
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def from_dict(data: dict[str, Any], cls: type = Experiment) -> Any:
    """Inverse of ``to_dict`` (used by workers that receive the config as JSON)."""
    return build(data, cls)


def write_json(cfg: Experiment, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path
