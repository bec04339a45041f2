"""``python -m launch.play RUN_DIR``: play a trial's policy from one of its checkpoints and print the returns.

    python -m launch.play runs/cartpole_ppo/<trial>                       # the best evaluated version, as evaluated
                                                                          # (the newest checkpoint if none was evaluated)
    python -m launch.play runs/cartpole_ppo/<trial> --checkpoint latest   # the newest checkpoint of the run
    python -m launch.play runs/cartpole_ppo/<trial> --checkpoint 40 --episodes 20 --sampled
    python -m launch.play runs/atari_ppo/<trial> --video                  # also RUN_DIR/videos/version-<v>.gif
    python -m launch.play hf:USER/NAME                                    # an agent launch.push shared (or its folder)

Any trial with one policy, single-process or distributed, any algorithm: the trial's own ``config.json``
says what to build. It plays with the evaluation's code (``srljax/evaluation/evaluator.py``): fresh envs
seeded ``eval.seed``, ``eval.episodes`` whole episodes, the greedy action (``--sampled``: sampled with
the evaluation's fixed key), so playing the best checkpoint with the trial's eval settings reproduces the
score recorded in ``eval.jsonl``, and the script says whether it did. Nothing in the run folder changes
(``--video`` adds a GIF under ``videos/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

HUB = "hf:"
CHECKPOINT_HELP = ("best (the best evaluated version, RUN_DIR/best/), latest, or an update number (default: best "
                   "where the trial evaluated, else latest)")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m launch.play", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the trial's run folder, e.g. runs/cartpole_ppo/<trial>; a folder "
                        "python -m launch.push wrote; or hf:USER/NAME, such a folder on the Hugging Face Hub")
    parser.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    parser.add_argument("--episodes", type=int, default=0, help="episodes to play (default: the trial's eval.episodes)")
    parser.add_argument("--sampled", action="store_true", help="sample actions instead of the greedy action")
    parser.add_argument("--video", action="store_true", help="record env 0's first episode (RUN_DIR/videos/)")
    return parser.parse_args(argv)


def load_config(run_dir: Path):
    """The trial's config, placed at ``run_dir`` wherever it was run from; ValueError naming the problem."""
    from srljax.config import from_dict

    path = run_dir / "config.json"
    try:
        cfg = from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist: give the trial's run folder (runs/<experiment>/<trial>)") from None
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path} is not a readable srljax config: {error}") from None
    if cfg.pbt.enabled or cfg.policies.enabled:
        raise ValueError(f"{run_dir} trained several policies (pbt or policies): play one member's run folder "
                         "(pbt/member-<i>) or one policy, which launch.play does not pick for you yet")
    log = dataclasses.replace(cfg.log, run_root=str(run_dir.parent.parent))
    return dataclasses.replace(cfg, log=log, name=run_dir.parent.name, trial=run_dir.name)


def build(cfg) -> tuple[object, object]:
    """(env spec, algorithm) of the trial's config, from one env copy of the evaluation's env; the compile cache
    on as the config says (what is compiled here is the evaluation's act, no run is started)."""
    import algos
    import envs
    from srljax.evaluation.evaluator import eval_env_config
    from srljax.parallel import compile_cache

    compile_cache.enable(cfg.compile_cache)

    probe = envs.make(dataclasses.replace(eval_env_config(cfg), num_envs=1), seed=cfg.eval.seed)
    spec = dataclasses.replace(probe.spec, num_envs=cfg.env.num_envs, batch_size=cfg.env.envs_per_recv)
    probe.close()
    return spec, algos.make(cfg, spec)


def hub_folder(where: str) -> Path:
    """``hf:USER/NAME``: the model repo ``launch.push`` uploaded, downloaded (huggingface_hub's cache); a
    folder is itself."""
    if not where.startswith(HUB):
        return Path(where)
    repo = where[len(HUB):]
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(f"{where!r}: give the model repo as hf:USER/NAME")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ValueError("playing hf:USER/NAME needs huggingface_hub, which is not installed: "
                         "pip install -e '.[hub]' (or download the repo's folder and play that)") from None
    try:
        return Path(snapshot_download(repo_id=repo))
    except Exception as error:  # offline, no such repo, no access: huggingface_hub's own message
        raise ValueError(f"could not download {repo} from the Hugging Face Hub: {type(error).__name__}: "
                         f"{error}") from None


def default_checkpoint(run_dir: Path) -> tuple[str, str]:
    """``(which, why)`` when ``--checkpoint`` is not given: the best evaluated version where ``RUN_DIR/best/``
    holds one, else the newest checkpoint (a run without evaluation, e.g. the README's first CartPole run)."""
    from srljax.evaluation.evaluator import BEST_DIR
    from srljax.storage.steps import read_meta

    if read_meta(run_dir / BEST_DIR) is not None:
        return "best", ""
    return "latest", (f"no best checkpoint in {run_dir / BEST_DIR} (the trial did not evaluate: eval.every_updates=0)"
                      "; playing the newest checkpoint instead")


def load_params(cfg, spec, algo, which: str) -> tuple[object, int, dict]:
    """(policy params, their version, the best checkpoint's meta or {}) for ``--checkpoint which``."""
    from srljax.evaluation.evaluator import load_best
    from srljax.learning.learner import Learner

    if which == "best":
        try:
            params, meta = load_best(cfg.run_dir, algo)
        except FileNotFoundError as error:
            raise ValueError(f"{error}; play --checkpoint latest instead") from None
        return params, int(meta.get("version", 0)), meta
    if which != "latest" and not which.isdigit():
        raise ValueError(f"--checkpoint {which!r}: {CHECKPOINT_HELP}")
    learner = Learner(cfg, spec)
    try:
        if learner.checkpointer.latest_step() is None:
            raise ValueError(f"{cfg.run_dir / 'checkpoints'} holds no checkpoint (the run ended before its first one, "
                             "or ran with checkpoint.final=false and checkpoint.every_updates=0)")
        steps = learner.checkpointer.all_steps()
        step = None if which == "latest" else int(which)
        if step is not None and step not in steps:
            raise ValueError(f"--checkpoint {step}: no such checkpoint; the run has {', '.join(map(str, steps))}")
        learner.restore(step=step)
        return learner.policy_params(), learner.version, {}
    finally:
        learner.close(final_checkpoint=False)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        run_dir = hub_folder(args.run_dir)
        cfg = load_config(run_dir)
        if args.episodes < 0:
            raise ValueError(f"--episodes {args.episodes} must be >= 1")
        from srljax.evaluation.evaluator import Evaluator

        evaluation = dataclasses.replace(cfg.eval, episodes=args.episodes or cfg.eval.episodes,
                                         deterministic=not args.sampled, video=args.video)
        cfg = dataclasses.replace(cfg, eval=evaluation)
        spec, algo = build(cfg)
        if args.checkpoint is None:
            args.checkpoint, why = default_checkpoint(run_dir)
            if why:
                print(why, flush=True)
        params, version, recorded = load_params(cfg, spec, algo, args.checkpoint)
    except ValueError as error:
        print(f"python -m launch.play: {error}", file=sys.stderr)
        return 2
    how = "sampled" if args.sampled else "greedy"
    print(f"{run_dir}: version {version} ({args.checkpoint}), {cfg.eval.episodes} episodes of {cfg.env.factory or cfg.env.id}, "
          f"{how} actions, env seed {cfg.eval.seed}", flush=True)
    result = Evaluator(cfg, algo).evaluate(params, version)
    record = result.record()
    print("returns: " + " ".join(f"{r:g}" for r in result.returns))
    print(f"mean {record['mean']:.2f}, median {record['median']:.2f}, min {record['min']:g}, max {record['max']:g}, "
          f"mean length {record['mean_length']:.1f}" + (f"; video {result.video}" if getattr(result, "video", None) else ""))
    if recorded and "mean" in recorded:
        same = (args.episodes in (0, recorded.get("episodes", cfg.eval.episodes)) and not args.sampled
                and abs(record["mean"] - float(recorded["mean"])) < 1e-6)
        print(f"recorded in eval.jsonl for version {version}: mean {float(recorded['mean']):.2f} -> "
              + ("reproduced" if same else "differs (other episodes, sampling or settings than the evaluation's)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
