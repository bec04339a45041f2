"""A finished trial's policy, restored from its run folder with its own ``config.json`` (``launch.play``,
``launch.push``, a ``ckpt:RUN_DIR`` bot: ``srljax/selfplay/checkpoint_bot.py``). Nothing in the run folder changes.

    cfg = load_config(run_dir)                       # the trial's config, placed at run_dir
    spec, algo = build(cfg)                          # its env spec (one probe env) and algorithm
    params, version, meta = load_params(cfg, spec, algo, "latest")   # or "best", or an update number
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

CHECKPOINT_HELP = ("best (the best evaluated version, RUN_DIR/best/), latest, or an update number (default: best "
                   "where the trial evaluated, else latest)")


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
