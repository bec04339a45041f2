"""The command line every launcher shares: ``CFG.py [-e NAME] [-f TRIAL] [key.path=value ...]``.

    cfg = parse(["configs/cartpole_ppo.py", "-f", "try1", "trainer.lr=1e-4"])

The experiment name defaults to the config file's stem, the trial name to a timestamp plus a
random suffix (``20250101-120000-3f9a1c``: two launches in one second differ). The whole tree is
validated (every problem at once, ``srljax/prepare.py``) before anything starts, and a trial whose run folder
already holds a run is refused (``srljax.storage.run_dir``): nothing is created until the config is accepted.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys

from srljax.config import ConfigError, Experiment, apply_overrides, load_file
from srljax.config.experiment import deterministic_inference
from srljax.prepare import check, problems
from srljax.storage import run_dir


def make_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("config", help="config file exposing experiment() -> Experiment, e.g. configs/cartpole_ppo.py")
    parser.add_argument("-e", "--experiment", help="experiment name (default: the config file's stem)")
    parser.add_argument("-f", "--trial", help="trial name (default: a timestamp and a random suffix); "
                        "its run folder must be new or empty")
    parser.add_argument("--resume", action="store_true",
                        help="continue trial -f from its newest checkpoint, with the config it was trained with "
                        f"and only the overrides given now; these may change: {run_dir.resumable_keys()}")
    parser.add_argument("--resume-from", type=int, metavar="STEP",
                        help="as --resume, from checkpoint step STEP (its update number) instead of the newest; the "
                        "later steps are moved to RUN_DIR/checkpoints.later/ (kept). A step that does not exist is "
                        "refused, naming the steps there")
    parser.add_argument("--show", action="store_true",
                        help="print the resolved config (every key, its type and meaning) and the derived sizes, "
                        "then exit; creates nothing (launch/show.py)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. total_env_steps=50000 trainer.lr=1e-4")
    return parser


def resolve(args: argparse.Namespace, backend: str | None = None) -> Experiment:
    """Load, override, name and validate (the tree, its worker graph, its env and its run folder);
    raise ConfigError listing every problem. Creates nothing."""
    cfg = load_file(args.config)
    bad: list[str] = []  # an override that cannot apply is reported with the value problems of the others
    for item in args.overrides:
        try:
            cfg = apply_overrides(cfg, [item])
        except ConfigError as err:
            bad += err.problems
    names = {"name": args.experiment or cfg.name, "trial": args.trial or run_dir.new_trial_name()}
    cfg = dataclasses.replace(cfg, **names)
    if bad:  # what else is wrong with the config as far as it could be applied; nothing about the run folder yet
        raise ConfigError(bad + problems(cfg, backend))
    resume = resume_of(args)
    if run_dir.resuming(resume) and not args.trial:
        raise ConfigError([f"{'--resume-from' if resume is not True else '--resume'} needs the trial to continue: "
                           "add -f TRIAL"])
    if run_dir.resuming(resume):  # the trial's own config, not the file's defaults: a resume changes only what it is told
        cfg, changes = run_dir.resume_config(cfg, args.overrides, run_dir.resume_step(resume))
        for change in changes:
            print(f"resume: {change}", flush=True)
    cfg, notes = deterministic_inference(cfg)
    for note in notes:
        print(note, flush=True)
    check(cfg, resume, backend)  # every owner's checks and the run folder's (srljax/prepare.py)
    return cfg


def resume_of(args: argparse.Namespace) -> bool | int:
    """``--resume`` (True), ``--resume-from N`` (N: ``srljax.storage.run_dir.resume_step``) or neither (False)."""
    step = getattr(args, "resume_from", None)
    if step is None:
        return bool(getattr(args, "resume", False))
    if step < 0:
        raise ConfigError([f"--resume-from {step}: a checkpoint step is an update number >= 0"])
    return step


def parse(argv: list[str] | None = None, prog: str = "launch", description: str = "") -> Experiment:
    args = make_parser(prog, description).parse_intermixed_args(argv)
    return resolve(args)


def run_cli(main, argv: list[str] | None, prog: str, description: str) -> int:
    """Parse, report config errors as one clear message (exit 2), else call ``main(cfg, resume)``. A launcher
    started in the background by a script (``&``) inherits SIGINT ignored, which Python keeps: it takes Ctrl-C's
    handler back, so ``kill -INT`` stops it as Ctrl-C does."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    args = make_parser(prog, description).parse_intermixed_args(argv)
    if args.show:
        from launch.show import show_config

        return show_config(args, prog)
    try:
        cfg = resolve(args)
    except ConfigError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    return main(cfg, resume=resume_of(args))
