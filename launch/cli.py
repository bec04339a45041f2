"""The command line every launcher shares: ``CFG.py [-e NAME] [-f TRIAL] [key.path=value ...]``.

    cfg = parse(["configs/cartpole_ppo.py", "-f", "try1", "trainer.lr=1e-4"])

The experiment name defaults to the config file's stem, the trial name to a timestamp. The
whole tree is validated (every problem at once) before anything starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import envs
from srljax.config import ConfigError, Experiment, apply_overrides, load_file, problems


def make_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("config", help="config file exposing experiment() -> Experiment, e.g. configs/cartpole_ppo.py")
    parser.add_argument("-e", "--experiment", help="experiment name (default: the config file's stem)")
    parser.add_argument("-f", "--trial", help="trial name (default: a timestamp)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. total_env_steps=50000 trainer.lr=1e-4")
    return parser


def resolve(args: argparse.Namespace) -> Experiment:
    """Load, override, name and validate (the tree and its env); raise ConfigError listing every problem."""
    cfg = load_file(args.config)
    cfg = apply_overrides(cfg, args.overrides)
    names = {"name": args.experiment or cfg.name, "trial": args.trial or time.strftime("%Y%m%d-%H%M%S")}
    cfg = dataclasses.replace(cfg, **names)
    found = problems(cfg) + envs.problems(cfg.env)
    if found:
        raise ConfigError(found)
    return cfg


def parse(argv: list[str] | None = None, prog: str = "launch", description: str = "") -> Experiment:
    args = make_parser(prog, description).parse_intermixed_args(argv)
    return resolve(args)


def run_cli(main, argv: list[str] | None, prog: str, description: str) -> int:
    """Parse, report config errors as one clear message (exit 2), else call ``main(cfg)``."""
    try:
        cfg = parse(argv, prog, description)
    except ConfigError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    return main(cfg)
