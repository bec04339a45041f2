"""A trained policy as a fixed bot: ``ckpt:RUN_DIR`` in ``selfplay.bots`` (or ``launch.play --bots``).

    selfplay.bots=[mcts100,ckpt:runs/connect_four_selfplay/ckpt]                 # its newest checkpoint, greedy
    selfplay.bots=[ckpt:runs/connect_four_selfplay/ckpt/checkpoints/12695]       # that checkpoint step
    selfplay.bots=[ckpt-sampled:runs/connect_four_selfplay/ckpt]                 # its moves sampled, seeded per game

The run folder is a one-policy, feed-forward run on an OpenSpiel game (``env.factory=envs.openspiel:make_openspiel``,
e.g. ``configs/connect_four_selfplay.py``); its own ``config.json`` says what to build, and its params are restored
as ``launch.play`` restores them (``srljax/evaluation/restore.py``). The bot sees the board as that run's
env showed it (``envs.openspiel.observe`` with the run's ``egocentric`` / ``info_state`` options) from the seat
to move, and plays the policy's most likely legal move (``ckpt:``) or a move drawn from it (``ckpt-sampled:``, the
key from the game's seed and the move number). A greedy bot against a deterministic agent (an AlphaZero search
with no noise, a greedy policy) plays the same two games (one per seat) over and over: the rows'
``distinct_games`` says how many different games were played (``srljax.selfplay.bots``).

``bot_problems`` is the config-time check (JSON reads only, no JAX): a missing folder, a run of another game or of an
env without an OpenSpiel twin, a recurrent or several-policy run, no checkpoint: one line each, naming the fix.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from srljax.config.selfplay import CHECKPOINT_BOTS, OPENSPIEL_FACTORY, bot_name_problems

GREEDY, SAMPLED = CHECKPOINT_BOTS
SELFPLAY_RUN = "python -m launch.local configs/connect_four_selfplay.py"


def is_checkpoint_bot(name: str) -> bool:
    return name.startswith((GREEDY, SAMPLED))


def parse(name: str) -> tuple[Path, int | None, bool]:
    """(run folder, checkpoint step or None for the newest, sampled) of a ``ckpt:`` / ``ckpt-sampled:`` bot."""
    sampled = name.startswith(SAMPLED)
    path = Path(name[len(SAMPLED if sampled else GREEDY):]).expanduser()
    if path.parent.name == "checkpoints" and path.name.isdigit():
        return path.parent.parent, int(path.name), sampled
    return path, None, sampled


def _run_config(run: Path) -> Any:
    from srljax.config import from_dict

    return from_dict(json.loads((run / "config.json").read_text()))


def run_game(cfg: Any) -> str | None:
    """The OpenSpiel game a run played, or None where it did not play one."""
    from envs.openspiel import OPTIONS

    if cfg.env.factory != OPENSPIEL_FACTORY:
        return None
    return str({**OPTIONS, **dict(cfg.env.options)}["game"])


def checkpoint_problem(name: str, game: str) -> str | None:
    """Why bot ``name`` cannot play ``game`` (None: it can), from the run folder's JSON files only."""
    from srljax.storage.steps import steps

    run, step, _ = parse(name)
    where = f"selfplay.bots: {name}"
    if not str(run) or str(run) == ".":
        return f"{where}: give the run folder after the colon, e.g. ckpt:runs/connect_four_selfplay/<trial>"
    if not (run / "config.json").is_file():
        return (f"{where}: {run / 'config.json'} does not exist; give the run folder of a trained self-play policy "
                f"(runs/<experiment>/<trial> of `{SELFPLAY_RUN}`), or RUN_DIR/checkpoints/<step>")
    try:
        cfg = _run_config(run)
    except (OSError, ValueError, TypeError) as error:
        return f"{where}: {run / 'config.json'} is not a readable srljax config ({error}); give a run folder"
    played = run_game(cfg)
    if played is None:
        return (f"{where}: {run} trained algo={cfg.algo.name} on {cfg.env.factory or cfg.env.id}, not on an OpenSpiel "
                f"game; a ckpt bot is a policy trained on env.factory=envs.openspiel:make_openspiel (`{SELFPLAY_RUN}`)")
    if played != game:
        return f"{where}: {run} played {played}, this evaluation plays {game}; give a run of {game}"
    if cfg.pbt.enabled or cfg.policies.enabled or cfg.selfplay.league:
        return (f"{where}: {run} trained several policies (pbt, policies or a league); give a one-policy run's "
                "folder (a PBT member's pbt/member-<i>)")
    if getattr(cfg.algo, "lstm_size", 0):
        return (f"{where}: {run} trained a recurrent policy (algo.lstm_size={cfg.algo.lstm_size}); a ckpt bot plays "
                "a feed-forward one (algo.lstm_size=0)")
    found = steps(run / "checkpoints")
    if not found:
        return (f"{where}: {run / 'checkpoints'} holds no checkpoint yet (a run with checkpoint.every_updates=0 writes "
                "its one at the end); wait for it, or give a finished run")
    if step is not None and step not in found:
        return f"{where}: no checkpoint step {step}; {run / 'checkpoints'} has {', '.join(map(str, found))}"
    return None


def bot_problems(bots: tuple[str, ...] | list[str], game: str) -> list[str]:
    """Every bot name of ``selfplay.bots`` that cannot play ``game``: one line each (the module docstring)."""
    return bot_name_problems(bots) + [p for b in bots if is_checkpoint_bot(b) for p in [checkpoint_problem(b, game)] if p]


def selfplay_checkpoint_problems(cfg: Any) -> list[str]:
    """A self-play config's ``ckpt:`` bots (their names: ``srljax.config.selfplay``; a search agent's bots are
    checked with its env, ``srljax.prepare.search_problems``)."""
    if not cfg.selfplay.enabled or cfg.env.factory != OPENSPIEL_FACTORY:
        return []
    game = run_game(cfg)
    return [p for b in cfg.selfplay.bots if is_checkpoint_bot(b) for p in [checkpoint_problem(b, game)] if p]


class CheckpointPolicy:
    """A run folder's policy, restored once (``load``), acting on OpenSpiel states."""

    def __init__(self, run: Path, step: int | None):
        import dataclasses

        import jax

        from envs.openspiel import seat_planes
        from srljax.evaluation.restore import build, load_config, load_params

        self.cfg = load_config(run)
        self.cfg = dataclasses.replace(self.cfg, eval=dataclasses.replace(self.cfg.eval, num_envs=1))
        spec, algo = build(self.cfg)
        self.params, self.version, _ = load_params(self.cfg, spec, algo, "latest" if step is None else str(step))
        opts = dict(self.cfg.env.options)
        self.egocentric, self.info_state = bool(opts.get("egocentric", False)), bool(opts.get("info_state", False))
        self._seat_planes = seat_planes
        self._greedy = jax.jit(algo.act_deterministic or algo.act)
        self._sampled = jax.jit(algo.act)
        self.jax = jax

    def bot(self, game: Any, seed: int, sampled: bool) -> Callable[[Any], int]:
        from envs.openspiel import observe

        planes = self._seat_planes(game) if self.egocentric else None
        key = self.jax.random.PRNGKey(seed)
        moves = [0]

        def step(state: Any) -> int:
            player = state.current_player()
            obs = observe(game, state, player, planes, self.info_state)[None]
            k = self.jax.random.fold_in(key, moves[0])
            moves[0] += 1
            act = self._sampled if sampled else self._greedy
            action = int(np.asarray(act(self.params, obs, (), None, k)[0])[0])
            if action not in state.legal_actions():
                raise ValueError(f"{self.cfg.run_dir}: the policy chose illegal move {action} (legal: "
                                 f"{state.legal_actions()}); was it trained with the action_mask?")
            return action

        return step


@functools.lru_cache(maxsize=8)
def load(run: Path, step: int | None) -> CheckpointPolicy:
    """The run's policy, restored once per process however many games it plays."""
    return CheckpointPolicy(run, step)


def make_checkpoint_bot(game: Any, name: str, seed: int) -> Callable[[Any], int]:
    """``bot(state) -> action`` for ``ckpt:RUN_DIR`` / ``ckpt-sampled:RUN_DIR`` (the module docstring)."""
    run, step, sampled = parse(name)
    return load(run.resolve(), step).bot(game, seed, sampled)
