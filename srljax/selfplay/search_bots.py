"""A search agent (AlphaZero, ``algos/alphazero.py``) on a pgx board game against OpenSpiel's bots.

    evals = SearchBotEval(cfg, algo, env)               # cfg.selfplay.bots, bot_games; cfg.eval's cadence and seed
    evals.after_update(version, params, env_steps)     # every eval.every_updates updates
    evals.finish(version, params, env_steps)           # the last version (eval.final), the summary line

pgx's and OpenSpiel's connect four (and tic-tac-toe) have the same rules and move numbers
(``envs.jax_envs.pgx_family.OPENSPIEL_GAMES``), so each game is played on both at once: the bot moves on OpenSpiel's
board, the agent searches (``algo.eval_simulations``, greedy) on its pgx twin, every move is applied to both. All
games run in lockstep, so one batched search answers every game waiting for the agent. Seats alternate (the agent
first in even games); the bots are seeded from ``eval.seed`` and the game index (``srljax.selfplay.bots``), so one
params version plays the same games. One ``eval.jsonl`` row per bot: ``opponent``, ``games``, ``win_rate``,
``draw_rate``, ``loss_rate``, ``mean`` (the agent's mean game score, +1 / 0 / -1), ``version``, ``env_steps``. With
``eval.keep_best`` the params of the best win rate against the last bot listed (the strongest) are kept in
``RUN_DIR/best/`` (what ``launch.play`` plays by default).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs.jax_envs import JaxEnv
from srljax.config import Experiment
from srljax.selfplay.bots import make_bot


def openspiel_game(env_id: str) -> str:
    """The OpenSpiel game a ``pgx/...`` env's bots play, or a ValueError naming the games that have one."""
    from envs.jax_envs.pgx_family import OPENSPIEL_GAMES

    name = env_id.split("/", 1)[-1]
    if not env_id.startswith("pgx/") or name not in OPENSPIEL_GAMES:
        raise ValueError(f"selfplay.bots on env.id={env_id!r}: the OpenSpiel bots play "
                         f"{', '.join('pgx/' + g for g in OPENSPIEL_GAMES)}; set selfplay.bots=[] for another env")
    return OPENSPIEL_GAMES[name]


def play_search_bots(game: Any, env: JaxEnv, choose: Any, bots: tuple[str, ...], games: int,
                     seed: int) -> list[dict[str, Any]]:
    """``choose(key, obs [G, D], inner) -> moves [G]`` (the agent on the pgx twins); one row per bot."""
    fam = env.family
    reset = jax.jit(jax.vmap(fam.reset))
    step = jax.jit(jax.vmap(fam.step))
    rows = []
    for b, name in enumerate(bots):
        obs, inner = reset(jax.random.split(jax.random.PRNGKey(seed), games))
        states = [game.new_initial_state() for _ in range(games)]
        players = [make_bot(game, name, (seed * 1_000_003 + 7919 * b + g) % 2**31) for g in range(games)]
        seat = np.arange(games) % 2
        key = jax.random.PRNGKey(seed + 1)
        histories = [[] for _ in range(games)]
        while not all(s.is_terminal() for s in states):
            key, k = jax.random.split(key)
            ours = np.asarray(choose(k, obs, inner))
            moves = np.zeros(games, np.int32)
            for g, s in enumerate(states):
                if s.is_terminal():
                    continue  # its twin is over too: pgx ignores the move
                moves[g] = ours[g] if s.current_player() == seat[g] else players[g](s)
                s.apply_action(int(moves[g]))
                histories[g].append(int(moves[g]))
            obs, inner = step(jax.random.split(k, games), inner, jnp.asarray(moves))[:2]
        scores = np.array([s.returns()[seat[g]] for g, s in enumerate(states)])
        rows.append({"opponent": name, "games": games, "win_rate": float(np.mean(scores > 0)),
                     "draw_rate": float(np.mean(scores == 0)), "loss_rate": float(np.mean(scores < 0)),
                     "mean": float(np.mean(scores)), "episodes": games,
                     "distinct_games": len({(seat[g], tuple(h)) for g, h in enumerate(histories)})})
    return rows


class SearchBotEval:
    """The Anakin loop's evaluation of a search algorithm (the module docstring)."""

    def __init__(self, cfg: Experiment, algo: Any, env: JaxEnv):
        self.cfg, self.algo, self.env = cfg, algo, env
        self.game = None
        self.run_dir = Path(cfg.run_dir)
        self.last_version = 0
        self.rows: list[dict[str, Any]] = []  # this trial's rows, a resumed one's earlier rows too
        path = self.run_dir / "eval.jsonl"
        for line in path.read_text().splitlines() if path.exists() else ():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "opponent" in row and "win_rate" in row:
                self.rows.append(row)
                self.last_version = max(self.last_version, int(row.get("version", 0)))
        self._choose = search_chooser(algo, env)

    @staticmethod
    def make(cfg: Experiment, algo: Any, env: JaxEnv) -> SearchBotEval | None:
        s = cfg.selfplay
        return SearchBotEval(cfg, algo, env) if s.bots and s.bot_games and (cfg.eval.every_updates or cfg.eval.final) \
            else None

    def evaluate(self, version: int, params: Any, env_steps: int) -> list[dict[str, Any]]:
        import pyspiel

        if self.game is None:
            self.game = pyspiel.load_game(openspiel_game(self.cfg.env.id))
        t0 = time.time()
        rows = play_search_bots(self.game, self.env, lambda k, o, i: self._choose(params, k, o, i),
                                tuple(self.cfg.selfplay.bots), self.cfg.selfplay.bot_games, self.cfg.eval.seed)
        self.last_version = version
        with open(self.run_dir / "eval.jsonl", "a") as f:
            for row in rows:
                row.update(version=version, env_steps=env_steps, simulations=self.algo.eval_simulations,
                           wall_s=round(time.time() - t0, 1), time=round(time.time(), 3))
                f.write(json.dumps(row) + "\n")
                print(f"[{self.cfg.name}/{self.cfg.trial}] update {version}: vs {row['opponent']} over {row['games']} "
                      f"games ({self.algo.eval_simulations} simulations a move): win {row['win_rate']:.1%}, "
                      f"draw {row['draw_rate']:.1%}, loss {row['loss_rate']:.1%}", flush=True)
        self.rows += rows
        self._keep_best(rows[-1], params)
        return rows

    def _keep_best(self, row: dict[str, Any], params: Any) -> None:
        from srljax.evaluation.evaluator import BEST_DIR
        from srljax.storage.checkpoint import Checkpointer

        mine = [r for r in self.rows if r["opponent"] == row["opponent"]]
        if not self.cfg.eval.keep_best or any(r["win_rate"] >= row["win_rate"] for r in mine if r is not row):
            return
        checkpointer = Checkpointer(self.run_dir / BEST_DIR, keep=1)
        try:
            checkpointer.save(row["version"], jax.device_get(params), meta=row)
            checkpointer.wait()
        finally:
            checkpointer.close()

    def after_update(self, version: int, params: Any, env_steps: int | None = None) -> None:
        every = self.cfg.eval.every_updates
        if every > 0 and version // every > self.last_version // every:
            self.evaluate(version, params, env_steps or 0)

    def finish(self, version: int, params: Any, env_steps: int | None = None, evaluate: bool = True) -> None:
        if evaluate and self.cfg.eval.final and version > self.last_version:
            self.evaluate(version, params, env_steps or 0)
        for bot in self.cfg.selfplay.bots:
            mine = [r for r in self.rows if r["opponent"] == bot]
            if mine:
                best = max(mine, key=lambda r: r["win_rate"])
                print(f"[{self.cfg.name}/{self.cfg.trial}] vs {bot}: last win rate {mine[-1]['win_rate']:.1%} "
                      f"(version {mine[-1]['version']}), best {best['win_rate']:.1%} (version {best['version']})",
                      flush=True)


def search_chooser(algo: Any, env: JaxEnv) -> Any:
    """``choose(params, key, obs [G, D], inner) -> moves [G]``: the agent's greedy search (``algo.eval_simulations``
    a move) on the pgx twins, compiled."""
    from srljax.learning.anakin_search import env_model

    sims, model = algo.eval_simulations, env_model(env)

    @jax.jit
    def choose(params: Any, key: jax.Array, obs: jax.Array, inner: Any) -> jax.Array:
        return algo.search(params, key, obs, inner, model, sims, explore=False)[0]

    return choose
