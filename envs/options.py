"""Env family options (``env.options``): each family declares its own with their defaults, and checks them.

    OPTIONS = {"frame_skip": 4, "difficulty": "easy"}      # a family's options: name -> default (its type)

    def make_env(cfg, seed):                                # env.factory="my_pkg.my_env:make_env"
        opts = with_defaults(cfg.options, OPTIONS)         # {"frame_skip": 4, "difficulty": "hard"}
        ...
    make_env.options = OPTIONS                              # so envs.problems checks names and types before launch
    make_env.option_problems = my_checks                    # optional: options -> list of value problems

A new env family is one file: its factory and its ``OPTIONS``. The built-in families: envpool Atari
(``envs/atari.py``), the synthetic env (``envs/synthetic.py``); the other envpool tasks take none.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any


def option_problems(options: Mapping[str, Any], schema: Mapping[str, Any], family: str) -> list[str]:
    """Each option ``schema`` does not know (with the close names) or whose value is not of its default's type."""
    out = []
    for name, value in options.items():
        if name not in schema:
            close = difflib.get_close_matches(name, list(schema), n=3)
            known = f"did you mean {', '.join(close)}?" if close else (
                f"{family} takes {', '.join(sorted(schema))}" if schema else f"{family} takes no options")
            out.append(f"env.options.{name}: unknown option for {family}; {known}")
            continue
        default = schema[name]
        # a float takes an int; a str takes an int (a number on the command line, e.g. obs_shape=17): the family str()s it
        want = (int, float) if isinstance(default, float) else (str, int) if isinstance(default, str) else type(default)
        if not isinstance(value, want) or (isinstance(value, bool) and not isinstance(default, bool)):
            out.append(f"env.options.{name}={value!r}: {family} expects a {type(default).__name__} "
                       f"(default {default!r})")
    return out


def with_defaults(options: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The family's defaults, overridden by ``options`` (checked by ``option_problems`` first)."""
    return {**schema, **options}
