"""The single-process loop's self-play: the env's opponent, the pool of snapshots, Elo ratings and bot evaluations.

    selfplay = SelfPlay(cfg, env, algo, params)    # env: envs.openspiel.OpenSpielVecEnv; sets env.opponent
    selfplay = SelfPlay(cfg, env, algo, params, resume=True)   # --resume: the pool and ratings as last written
    ...                                             # the env asks selfplay.begin / act / end as games go
    metrics = selfplay.after_update(version, params, env_steps)   # snapshots, ratings, bot evaluations when due
    selfplay.finish(version, params, env_steps)     # the last bot evaluation and the ratings plot

Each game draws its opponent when it starts (``OpponentPool.sample``: a snapshot, or the current policy); the
opponents act by the algorithm's own ``act`` (sampling) with their params: every opponent's params are stacked on a
leading axis (rebuilt when the pool or the current params change) and one padded, jitted call per env step
``vmap``s ``act`` over them and keeps each row's own opponent's action. Every finished game updates the pool's scores (PFSP) and, against a snapshot, the Elo of
the main agent (``main``) and of that snapshot. Every ``selfplay.snapshot_every`` updates the current params join
the pool at the main agent's rating (and ``RUN_DIR/pool/v<version>.msgpack``; a snapshot dropped from the pool
leaves its file too) and a line goes to ``RUN_DIR/ratings.jsonl``: the version, env steps, the main agent's Elo,
every snapshot's Elo and the main agent's recent score per opponent. At the end ``ratings.png`` plots the main
agent's Elo over env steps. Bot evaluations (``srljax.selfplay.bots``) write one ``eval.jsonl`` row per bot.
A resumed trial restores the pool (its snapshots' files), their scores and the ratings from the last
``ratings.jsonl`` line; games since that line are not counted again.
"""

from __future__ import annotations

import functools
import json
import os
from collections import deque
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from srljax.selfplay.bots import play_bots
from srljax.selfplay.elo import Elo
from srljax.selfplay.pool import LATEST, OpponentPool

MAIN = "main"
RECENT = 500  # games in the recent-score window of the metrics


def act_stacked(act: Any, stacked: Any, obs: Any, which: Any, key: Any) -> Any:
    """Actions ``[B]``: row b acted by opponent ``which[b]``, whose params are ``stacked``'s entry ``which[b]``
    (every opponent acts on every row, ``vmap``; a small network's extra rows cost less than a call each)."""
    keys = jax.random.split(key, jax.tree.leaves(stacked)[0].shape[0])
    actions = jax.vmap(lambda p, k: act(p, obs, (), None, k)[0])(stacked, keys)  # [P, B]
    return jnp.take_along_axis(actions, which[None, :], axis=0)[0]


def padded_rows(obs: np.ndarray, ids: np.ndarray, assigned: list[str], rows: dict[str, int], num_envs: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """``obs`` padded to ``num_envs`` rows (one compiled size for any batch) and each row's opponent's index in the
    stacked params (``rows[assigned[id]]``; 0 for the padding)."""
    padded = np.zeros((num_envs, *obs.shape[1:]), np.float32)
    padded[: len(ids)] = obs
    which = np.zeros(num_envs, np.int32)
    which[: len(ids)] = [rows[assigned[i]] for i in ids.tolist()]
    return padded, which


def stack_params(params: list[Any]) -> Any:
    """Host params of one structure stacked on a new leading axis."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *params)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def plot_ratings(out: Path, series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str, title: str) -> Path:
    """A line per series of (x, Elo) points, written to ``out`` (the self-play and league ``ratings.png``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, points in series.items():
        ax.plot([x for x, _ in points], [y for _, y in points], label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(series) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


class SelfPlay:
    def __init__(self, cfg: Any, env: Any, algo: Any, params: Any, resume: bool = False):
        s = self.settings = cfg.selfplay
        self.cfg, self.env, self.run_dir = cfg, env, Path(cfg.run_dir)
        self.pool = OpponentPool(s.pool_size, s.sampling, s.pfsp_power, s.latest_share)
        self.elo = Elo(s.elo_k)
        self.elo.add(MAIN)
        self.rng = np.random.default_rng([cfg.seed, 4099])
        self.key = jax.random.PRNGKey(cfg.seed + 4099)
        self.num_envs = env.spec.num_envs
        self._act = jax.jit(functools.partial(act_stacked, algo.act))
        self._stack_names: dict[str, int] = {}
        self._stacked: Any = None
        self._greedy = jax.jit(algo.act_deterministic or algo.act)
        self.current = params
        self.assigned = [LATEST] * env.spec.num_envs
        self.retired: dict[str, Any] = {}  # dropped from the pool while a game against it goes on: its params
        self.recent: deque[tuple[str, float]] = deque(maxlen=RECENT)
        self.games = 0
        (self.run_dir / "pool").mkdir(parents=True, exist_ok=True)
        if not (resume and self._restore(params)):
            self.snapshot(0, params)
        env.opponent = self

    def _restore(self, template: Any) -> bool:
        """The pool and ratings of the last ``ratings.jsonl`` line (``template``: params of the same structure)."""
        path = self.run_dir / "ratings.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        if not lines:
            return False
        last = json.loads(lines[-1])
        host = jax.device_get(template)
        for name in last["pool"]:
            data = (self.run_dir / "pool" / f"{name}.msgpack").read_bytes()
            self.pool.add(int(name[1:]), flax.serialization.from_bytes(host, data))
            score = last["main_score"].get(name, 0.5)
            self.pool.snapshots[name].wins, self.pool.snapshots[name].games = score * 2.0, 2.0
        self.elo.ratings.update(last["elo"])
        return True

    # -- the env's opponent ------------------------------------------------------------------------------
    def begin(self, index: int) -> None:
        self.assigned[index] = self.pool.sample(self.rng)

    def act(self, obs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        if self._stacked is None:
            self._restack()
        padded, which = padded_rows(obs, ids, self.assigned, self._stack_names, self.num_envs)
        self.key, key = jax.random.split(self.key)
        return np.asarray(self._act(self._stacked, padded, which, key))[: len(ids)]

    def _restack(self) -> None:
        """Every opponent's params (current, pool, retired) stacked on a leading axis, and each one's row there."""
        named = {LATEST: self.current, **{n: s.params for n, s in self.pool.snapshots.items()}, **self.retired}
        self._stack_names = {name: i for i, name in enumerate(named)}
        self._stacked = stack_params([jax.device_get(p) for p in named.values()])

    def end(self, index: int, score: float) -> None:
        name = self.assigned[index]
        self.pool.record(name, score)
        if name != LATEST:
            self.elo.update(MAIN, name, score)
        self.recent.append((name, score))
        self.games += 1

    # -- the loop's hooks ------------------------------------------------------------------------------------
    def snapshot(self, version: int, params: Any) -> None:
        host = jax.device_get(params)
        dropped = self.pool.add(version, host)
        name = f"v{version}"
        self.elo.ratings[name] = self.elo.rating(MAIN)  # a snapshot starts at its source's rating
        path = self.run_dir / "pool" / f"{name}.msgpack"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(flax.serialization.to_bytes(host))
        os.replace(tmp, path)
        playing = set(self.assigned)
        self.retired = {n: p for n, p in self.retired.items() if n in playing}
        for old in dropped:
            if old.name in playing:
                self.retired[old.name] = old.params
            (self.run_dir / "pool" / f"{old.name}.msgpack").unlink(missing_ok=True)
        self._stacked = None

    def metrics(self) -> dict[str, float]:
        scores = [s for _, s in self.recent]
        vs_pool = [s for n, s in self.recent if n != LATEST]
        return {"elo_main": round(self.elo.rating(MAIN), 2), "pool_size": len(self.pool.snapshots),
                "selfplay_games": self.games, "score_recent": float(np.mean(scores)) if scores else float("nan"),
                "score_vs_pool": float(np.mean(vs_pool)) if vs_pool else float("nan")}

    def after_update(self, version: int, params: Any, env_steps: int) -> dict[str, float]:
        self.current = params
        self._stacked = None  # restacked at the next opponent move
        s = self.settings
        if version % s.snapshot_every == 0:
            self.snapshot(version, params)
            self._write("ratings.jsonl", {
                "version": version, "env_steps": env_steps, "elo_main": self.elo.rating(MAIN),
                "elo": {k: round(v, 2) for k, v in self.elo.ratings.items()},
                "pool": sorted(self.pool.snapshots, key=lambda n: int(n[1:])),
                "main_score": {n: round(p.main_score, 3) for n, p in self.pool.snapshots.items()},
                "sampling": {k: round(v, 4) for k, v in self.pool.weights().items()}})
        if s.bot_every_updates and version % s.bot_every_updates == 0:
            self.evaluate(version, params, env_steps)
        return self.metrics()

    def evaluate(self, version: int, params: Any, env_steps: int) -> list[dict[str, Any]]:
        """The main agent (greedy) against every bot of ``selfplay.bots``: one ``eval.jsonl`` row each."""
        s = self.settings
        if not s.bots or not s.bot_games:
            return []
        key = jax.random.PRNGKey(0)

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.asarray(self._greedy(params, obs.astype(np.float32), (), None, key)[0])

        rows = play_bots(self.env.game, policy, tuple(s.bots), s.bot_games, seed=self.cfg.eval.seed,
                         planes=self.env.planes)
        for row in rows:
            row.update(version=version, env_steps=env_steps, elo_main=round(self.elo.rating(MAIN), 2))
            self._write("eval.jsonl", row)
            print(f"[{self.cfg.name}/{self.cfg.trial}] update {version}: vs {row['opponent']} over {row['games']} "
                  f"games: win {row['win_rate']:.1%}, draw {row['draw_rate']:.1%}, loss {row['loss_rate']:.1%}",
                  flush=True)
        return rows

    def finish(self, version: int, params: Any, env_steps: int, evaluate: bool = True) -> None:
        if evaluate and not (self.settings.bot_every_updates and version % self.settings.bot_every_updates == 0):
            self.evaluate(version, params, env_steps)
        self.plot()

    def plot(self) -> Path | None:
        """``ratings.png``: the main agent's Elo over env steps, from ``ratings.jsonl``."""
        rows = read_jsonl(self.run_dir / "ratings.jsonl")
        if not rows:
            return None
        return plot_ratings(self.run_dir / "ratings.png", {"main agent": [(r["env_steps"], r["elo_main"]) for r in rows]},
                            "env steps", "Elo (vs its own snapshots)",
                            f"{self.cfg.name}/{self.cfg.trial}: {self.settings.sampling} self-play")

    def _write(self, name: str, row: dict[str, Any]) -> None:
        with open(self.run_dir / name, "a") as f:
            f.write(json.dumps(row) + "\n")
