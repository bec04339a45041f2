"""``python -m launch.play RUN_DIR``: play a trial's policy from one of its checkpoints and print the returns.

    python -m launch.play runs/cartpole_ppo/<trial>                       # the best evaluated version, as evaluated
                                                                          # (the newest checkpoint if none was evaluated)
    python -m launch.play runs/cartpole_ppo/<trial> --checkpoint latest   # the newest checkpoint of the run
    python -m launch.play runs/cartpole_ppo/<trial> --checkpoint 40 --episodes 20 --sampled
    python -m launch.play runs/atari_ppo/<trial> --video                  # also RUN_DIR/videos/version-<v>.gif
    python -m launch.play hf:USER/NAME                                    # an agent launch.push shared (or its folder)
    python -m launch.play runs/connect_four_alphazero/<trial> --checkpoint latest \
        --bots mcts100 ckpt:runs/connect_four_selfplay/<trial> --games 200     # a two-player game's agent vs bots

Any trial with one policy, single-process or distributed, any algorithm: the trial's own ``config.json``
says what to build. It plays with the evaluation's code (``srljax/evaluation/evaluator.py``): fresh envs
seeded ``eval.seed``, ``eval.episodes`` whole episodes, the greedy action (``--sampled``: sampled with
the evaluation's fixed key), so playing the best checkpoint with the trial's eval settings reproduces the
score recorded in ``eval.jsonl``, and the script says whether it did. Nothing in the run folder changes
(``--video`` adds a GIF under ``videos/``).

``--bots`` plays a two-player game's agent (an AlphaZero run on a pgx game, searching ``algo.eval_simulations`` a
move, ``srljax/selfplay/search_bots.py``; an OpenSpiel self-play run, greedy, ``srljax/selfplay/bots.py``)
against ``selfplay.bots``-style bots instead: ``random``, ``mcts<N>``, ``ckpt:RUN_DIR`` (another run's trained
policy, ``srljax/selfplay/checkpoint_bot.py``), ``--games`` games each, seats alternated, seeded ``eval.seed``
(``--seed``) as the run's own evaluation: the same params and bots, listed in the run's ``selfplay.bots`` order
(a bot's seed depends on its place in the list), reproduce its ``eval.jsonl`` rows. One line and
one JSON line per bot (``--out FILE`` also appends the JSON rows there).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from srljax.evaluation.restore import CHECKPOINT_HELP, build, default_checkpoint, load_config, load_params

HUB = "hf:"
__all__ = ["CHECKPOINT_HELP", "build", "default_checkpoint", "load_config", "load_params", "main"]



def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m launch.play", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="the trial's run folder, e.g. runs/cartpole_ppo/<trial>; a folder "
                        "python -m launch.push wrote; or hf:USER/NAME, such a folder on the Hugging Face Hub")
    parser.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    parser.add_argument("--episodes", type=int, default=0, help="episodes to play (default: the trial's eval.episodes)")
    parser.add_argument("--sampled", action="store_true", help="sample actions instead of the greedy action")
    parser.add_argument("--video", action="store_true", help="record env 0's first episode (RUN_DIR/videos/)")
    parser.add_argument("--bots", nargs="+", metavar="BOT", help="play a two-player game's agent against these bots "
                        "instead: random, mcts<N>, ckpt:RUN_DIR (a trained self-play run's policy, greedy), "
                        "ckpt-sampled:RUN_DIR")
    parser.add_argument("--games", type=int, default=0, help="games per bot with --bots (default: the trial's "
                        "selfplay.bot_games), seats alternated")
    parser.add_argument("--seed", type=int, default=None, help="the games' seed with --bots (default: eval.seed)")
    parser.add_argument("--out", default=None, help="with --bots: append the JSON rows to this file")
    return parser.parse_args(argv)


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


def bots_game(cfg) -> str:
    """The OpenSpiel game a run's agent plays against bots; ValueError where it plays none."""
    from srljax.config import consumes
    from srljax.selfplay.checkpoint_bot import run_game

    if consumes(cfg.algo) == "search" and cfg.env.is_jax:
        from srljax.selfplay.search_bots import openspiel_game

        return openspiel_game(cfg.env.id)
    game = run_game(cfg)
    if game is None:
        raise ValueError(f"--bots plays a two-player game's agent (algo=alphazero on pgx/<game>, or a self-play run "
                         f"on env.factory=envs.openspiel:make_openspiel); {cfg.run_dir} trained algo={cfg.algo.name} "
                         f"on {cfg.env.factory or cfg.env.id}: drop --bots to play its episodes")
    return game


def play_bots_of(cfg, algo, params, game_name: str, bots: list[str], games: int, seed: int) -> list[dict]:
    """The agent of ``cfg`` with ``params`` against each bot, as its run's evaluation plays them."""
    import jax
    import numpy as np
    import pyspiel

    game = pyspiel.load_game(game_name)
    if cfg.env.is_jax:  # a search agent on the pgx twin of the game
        from envs import jax_envs
        from srljax.selfplay.search_bots import play_search_bots, search_chooser

        env = jax_envs.make(dataclasses.replace(cfg.env, num_envs=games))
        choose = search_chooser(algo, env)
        return play_search_bots(game, env, lambda k, o, i: choose(params, k, o, i), tuple(bots), games, seed)
    from envs.openspiel import seat_planes
    from srljax.selfplay.bots import play_bots

    greedy = jax.jit(algo.act_deterministic or algo.act)
    key = jax.random.PRNGKey(0)
    planes = seat_planes(game) if dict(cfg.env.options).get("egocentric") else None
    return play_bots(game, lambda obs: np.asarray(greedy(params, obs.astype(np.float32), (), None, key)[0]),
                     tuple(bots), games, seed=seed, planes=planes)


def main_bots(args: argparse.Namespace, run_dir: Path, cfg) -> int:
    from srljax.selfplay.checkpoint_bot import bot_problems

    try:
        game = bots_game(cfg)
        wrong = bot_problems(args.bots, game)
        if wrong:
            raise ValueError("; ".join(p.replace("selfplay.bots", "--bots", 1) for p in wrong))
        games = args.games or cfg.selfplay.bot_games or 200
        if games < 1:
            raise ValueError(f"--games {games} must be >= 1")
        spec, algo = build(dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, num_envs=1)))
        which = args.checkpoint or default_checkpoint(run_dir)[0]
        params, version, _ = load_params(cfg, spec, algo, which)
    except ValueError as error:
        print(f"python -m launch.play: {error}", file=sys.stderr)
        return 2
    seed = cfg.eval.seed if args.seed is None else args.seed
    sims = f", {algo.eval_simulations} simulations a move" if getattr(algo, "eval_simulations", 0) else ", greedy"
    print(f"{run_dir}: version {version} ({which}) playing {game}{sims}; {games} games per bot, seats alternated, "
          f"seed {seed}", flush=True)
    for row in play_bots_of(cfg, algo, params, game, args.bots, games, seed):
        row.update(run_dir=str(run_dir), version=version, checkpoint=which, seed=seed)
        print(f"vs {row['opponent']}: win {row['win_rate']:.1%}, draw {row['draw_rate']:.1%}, loss "
              f"{row['loss_rate']:.1%} over {row['games']} games ({row['distinct_games']} distinct)", flush=True)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.bots:
        try:
            run_dir = hub_folder(args.run_dir)
            cfg = load_config(run_dir)
        except ValueError as error:
            print(f"python -m launch.play: {error}", file=sys.stderr)
            return 2
        return main_bots(args, run_dir, cfg)
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
