"""``python -m launch.push RUN_DIR --repo USER/NAME``: a trained agent as a folder to share (model card, checkpoint).

    python -m launch.push runs/cartpole_ppo/<trial> --repo me/cartpole-ppo            # RUN_DIR/hub/cartpole-ppo/
    python -m launch.push runs/cartpole_ppo/<trial> --repo me/cartpole-ppo --upload   # and to the Hugging Face Hub
    python -m launch.play runs/cartpole_ppo/<trial>/hub/cartpole-ppo                  # plays it, as recorded
    python -m launch.play hf:me/cartpole-ppo                                          # the same, downloaded

The folder holds what ``launch.play`` reads from a run folder, so it plays the same way:

- ``config.json``: the trial's config, as trained;
- ``best/<version>/``: the pushed version's policy params (orbax; the best evaluated version, else the newest
  checkpoint, as ``launch.play`` picks; ``--checkpoint`` to choose), with its evaluation as the checkpoint's meta;
- ``eval.jsonl``: that evaluation, run here with the trial's eval settings (fixed env seed ``eval.seed``,
  ``eval.episodes`` greedy episodes: the evaluation's code, ``srljax/evaluation/evaluator.py``), so playing the
  folder says ``reproduced``; where the run evaluated that version too, the card says whether it matches;
- ``README.md``: the model card (Hugging Face metadata, env, algorithm, the eval table, the learning curve, the
  eval video where the env renders, the commands that reproduce it and play it);
- ``curve.png`` (from ``metrics.jsonl``, also copied), ``videos/version-<v>.gif``, ``experiment.py`` (the config
  file that trains it again: ``python -m launch.local FOLDER/experiment.py``).

Nothing is uploaded unless ``--upload`` is given (``huggingface_hub``, ``pip install -e '.[hub]'``; its login or
``HF_TOKEN``). The run folder is not changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path
from typing import Any

PROG = "python -m launch.push"
EXTRA = "hub"
HUB_DIR = "hub"

EXPERIMENT_PY = '''"""The config this agent was trained with (config.json beside this file), as a config file:

    python -m launch.local {here}/experiment.py            # trains it again (a new trial of experiment {name!r})
"""

import json
from pathlib import Path

from srljax.config import from_dict


def experiment():
    return from_dict(json.loads((Path(__file__).parent / "config.json").read_text()))
'''


def parse(argv: list[str] | None) -> argparse.Namespace:
    from launch.play import CHECKPOINT_HELP

    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the trial's run folder, e.g. runs/cartpole_ppo/<trial>")
    parser.add_argument("--repo", required=True, help="the Hugging Face model repo, USER/NAME")
    parser.add_argument("--out", help=f"the folder to write (default: RUN_DIR/{HUB_DIR}/NAME); must be new or empty")
    parser.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    parser.add_argument("--episodes", type=int, default=0, help="evaluation episodes (default: the trial's eval.episodes)")
    parser.add_argument("--no-video", action="store_true", help="do not record an evaluation episode")
    parser.add_argument("--upload", action="store_true", help="upload the folder to the Hub (huggingface_hub)")
    parser.add_argument("--private", action="store_true", help="with --upload: create the repo private")
    return parser.parse_args(argv)


def repo_problems(repo: str) -> list[str]:
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts) or any(c.isspace() for c in repo):
        return [f"--repo {repo!r}: give the model repo as USER/NAME, e.g. me/cartpole-ppo"]
    return []


def write_folder(run_dir: Path, out: Path, repo: str, checkpoint: str | None = None, episodes: int = 0,
                 video: bool = True) -> dict[str, Any]:
    """Write the shared folder ``out`` from trial ``run_dir``; returns the evaluation record. ValueError naming
    the problem (no config, no checkpoint, a folder that is not empty)."""
    from launch.play import build, default_checkpoint, load_config, load_params
    from srljax.evaluation.evaluator import EvalBook, Evaluator, read_evals

    cfg = load_config(run_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} is not an empty folder: give --out a new folder, or remove that one")
    spec, algo = build(cfg)
    which, why = (checkpoint, "") if checkpoint else default_checkpoint(run_dir)
    if why:
        print(why, flush=True)
    params, version, recorded = load_params(cfg, spec, algo, which)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / "config.json", out / "config.json")
    mine = load_config(out)  # the same config, placed at the folder
    mine = dataclasses.replace(
        mine, eval=dataclasses.replace(mine.eval, episodes=episodes or mine.eval.episodes, deterministic=True,
                                       keep_best=True, video=video),
        log=dataclasses.replace(mine.log, tensorboard=False, wandb="disabled"))
    print(f"evaluating version {version} ({which}): {mine.eval.episodes} greedy episodes, env seed {mine.eval.seed}",
          flush=True)
    result = Evaluator(mine, algo).evaluate(params, version)
    env_steps = _env_steps_of(run_dir, version)
    book = EvalBook(mine)
    try:
        record = book.add(result, params, env_steps=env_steps)
    finally:
        book.close()
    if (run_dir / "metrics.jsonl").exists():
        shutil.copyfile(run_dir / "metrics.jsonl", out / "metrics.jsonl")
    curve = plot_curve(run_dir / "metrics.jsonl", out / "curve.png", version_steps=env_steps)
    earlier = recorded if "mean" in recorded else next((e for e in read_evals(run_dir) if e.get("version") == version),
                                                       None)
    (out / "experiment.py").write_text(EXPERIMENT_PY.format(here=out, name=cfg.name))
    (out / "README.md").write_text(model_card(cfg, repo, record, which, env_steps, curve, earlier, out))
    return record


def _env_steps_of(run_dir: Path, version: int) -> int | None:
    """The env steps the trial had taken at update ``version`` (its metrics line), None if not logged."""
    from launch.sweep.trials import read_records

    for record in read_records(run_dir / "metrics.jsonl"):
        if record.get("update") == version and isinstance(record.get("env_steps"), int):
            return record["env_steps"]
    return None


def plot_curve(metrics: Path, path: Path, version_steps: int | None = None) -> bool:
    """``curve.png``: episode return against env steps (the pushed version marked); False without data."""
    from launch.sweep.trials import read_records

    rows = [r for r in read_records(metrics) if isinstance(r.get("episode_return"), (int, float))]
    if not rows:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["env_steps"] for r in rows], [r["episode_return"] for r in rows], lw=1.5)
    if version_steps is not None:
        ax.axvline(version_steps, color="C3", ls="--", lw=1, label="pushed version")
        ax.legend(fontsize=8)
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return (recent mean)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def model_card(cfg: Any, repo: str, record: dict[str, Any], which: str, env_steps: int | None, curve: bool,
               earlier: dict[str, Any] | None, out: Path) -> str:
    from srljax.config import to_dict

    env = cfg.env.factory or cfg.env.id
    algo = getattr(cfg.algo, "name", "") or type(cfg.algo).__name__.removesuffix("Config").lower()
    name = repo.split("/")[1]
    mean, std = record["mean"], record["std"]
    front = "\n".join([
        "---", "library_name: srljax", "tags:", "- reinforcement-learning", "- deep-reinforcement-learning",
        "- srljax", f"- {env}", f"- {algo}", "model-index:", f"- name: {algo}-{env}", "  results:",
        "  - task:", "      type: reinforcement-learning", "      name: reinforcement-learning", "    dataset:",
        f"      name: {env}", f"      type: {env}", "    metrics:", "    - type: mean_reward",
        f"      value: {mean:.2f} +/- {std:.2f}", "      name: mean_reward", "      verified: false", "---"])
    match = ""
    if earlier is not None:
        same = (abs(float(earlier["mean"]) - mean) < 1e-6 and earlier.get("episodes") == record["episodes"])
        match = (f"The run's own evaluation of version {record['version']} (`eval.jsonl` of the run) recorded mean "
                 f"{float(earlier['mean']):.2f} over {earlier.get('episodes')} episodes: "
                 + ("reproduced here." if same else "this evaluation differs (other episodes or settings)."))
    returns = " ".join(f"{r:g}" for r in record["returns"])
    video = record.get("video")
    lines = [front, "", f"# {algo.upper()} on {env} (srljax)", "",
             f"A {algo} agent trained with [srljax](https://github.com/) on `{env}`: version {record['version']} "
             f"({which} checkpoint of trial `{cfg.name}/{cfg.trial}`"
             + (f", {env_steps:,} env steps" if env_steps is not None else "") + f", of {cfg.total_env_steps:,}).",
             "", "## Evaluation", "",
             f"{record['episodes']} episodes, greedy actions, env seed {cfg.eval.seed} (`eval.seed`), on fresh envs:", "",
             "| mean | median | std | min | max | mean length |", "| --- | --- | --- | --- | --- | --- |",
             f"| {mean:.2f} | {record['median']:.2f} | {std:.2f} | {record['min']:g} | {record['max']:g} | "
             f"{record['mean_length']:.1f} |", "", f"Returns: {returns}.", ""]
    if match:
        lines += [match, ""]
    if curve:
        lines += ["## Learning curve", "", "![episode return against env steps](curve.png)", ""]
    if video:
        lines += ["## An evaluation episode", "", f"![env 0's first evaluation episode]({video})", ""]
    elif record.get("video_skipped"):
        lines += [f"No video: {record['video_skipped']}", ""]
    lines += ["## Use it", "", "```bash", f"python -m launch.play hf:{repo}        # downloads it, plays "
              f"{record['episodes']} episodes: reproduces the table above",
              f"python -m launch.play {name}             # this folder, downloaded", "```", "",
              "## Train it again", "", "```bash", f"python -m launch.local {name}/experiment.py    # the config below",
              "```", "", "## Config", "",
              f"Environment `{env}` ({cfg.env.num_envs} envs), algorithm `{algo}`, {cfg.total_env_steps:,} env steps, "
              f"layout `{cfg.layout.mode}`, seed {cfg.seed}. The whole config (`config.json`):", "",
              "```json", json.dumps(to_dict(cfg), indent=2, sort_keys=True), "```", ""]
    return "\n".join(lines)


def upload(folder: Path, repo: str, private: bool) -> str:
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise ValueError(f"--upload needs huggingface_hub, which is not installed: pip install -e '.[{EXTRA}]' "
                         f"(the folder {folder} is written; upload it later with --upload or by hand)") from None
    api = HfApi()
    try:
        api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="model",
                          commit_message="srljax: launch.push")
    except Exception as error:  # no login, offline, no access: the Hub's own message
        raise ValueError(f"upload to {repo} failed: {type(error).__name__}: {error} (the folder {folder} is "
                         "written; log in with `huggingface-cli login` or set HF_TOKEN)") from None
    return f"https://huggingface.co/{repo}"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run_dir = Path(args.run_dir)
    try:
        if found := repo_problems(args.repo):
            raise ValueError("; ".join(found))
        if args.episodes < 0:
            raise ValueError(f"--episodes {args.episodes} must be >= 1")
        out = Path(args.out) if args.out else run_dir / HUB_DIR / args.repo.split("/")[1]
        record = write_folder(run_dir, out, args.repo, args.checkpoint, args.episodes, video=not args.no_video)
        print(f"{out}: version {record['version']}, mean return {record['mean']:.2f} over {record['episodes']} "
              f"episodes; model card {out / 'README.md'}", flush=True)
        print(f"play it: python -m launch.play {out}", flush=True)
        if args.upload:
            print(f"uploaded: {upload(out, args.repo, args.private)}  (play it: python -m launch.play hf:{args.repo})",
                  flush=True)
        else:
            print(f"not uploaded (add --upload to send it to the Hub as {args.repo})", flush=True)
    except ValueError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
