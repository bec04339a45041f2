"""What a league writes to its run folder, the same from the single-process league and the distributed league manager.

    records = LeagueRecords(run_dir, league, trial="connect4/t0")
    records.save_snapshot("m0-v40", host_params)     # RUN_DIR/league/pool/m0-v40.msgpack (atomic)
    records.write_table()                            # RUN_DIR/league/table.json: each member's opponents (atomic)
    records.ratings(env_steps=[...], versions=[...]) # a line of RUN_DIR/league/ratings.jsonl
    records.summary(versions, env_steps)             # league/members.json, league/matches.json, league/ratings.png

``league/table.json`` is what a distributed league's actors read to draw opponents: ``{"members": [{"member",
"role", "weights": {name: probability}}], "files": {name: "pool/<name>.msgpack"}}``; a snapshot's file is written
before any table names it, and a file of a snapshot the league dropped is deleted only after a table without it.
``league/matches.json`` has the match matrix: ``score[i][j]``, member i's mean score against member j (any of j's
snapshots; ``null`` where they have not met) and ``games[i][j]``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import flax.serialization

from srljax.selfplay.league import League, player
from srljax.selfplay.opponents import plot_ratings, read_jsonl

LEAGUE_DIR = "league"
POOL_DIR = "pool"
TABLE = "table.json"


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def load_params(path: Path, template: Any) -> Any | None:
    """Params of ``template``'s structure from a snapshot file; None if it cannot be read (yet, or any more)."""
    try:
        return flax.serialization.from_bytes(template, path.read_bytes())
    except (OSError, ValueError, KeyError):
        return None


def read_table(path: Path) -> dict[str, Any] | None:
    """``table.json`` as written by ``LeagueRecords.write_table``; None if missing or not (yet) whole."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return table if isinstance(table, dict) and isinstance(table.get("members"), list) else None


class LeagueRecords:
    def __init__(self, run_dir: Path, league: League, trial: str = ""):
        self.league, self.trial = league, trial
        self.dir = Path(run_dir) / LEAGUE_DIR
        (self.dir / POOL_DIR).mkdir(parents=True, exist_ok=True)
        self.stale: list[str] = []  # dropped snapshots whose files go once a table without them is written

    def clear(self) -> None:
        """Delete the snapshot files and table an earlier league left here (a restarted manager's)."""
        for path in (self.dir / POOL_DIR).glob("*.msgpack"):
            path.unlink(missing_ok=True)
        (self.dir / TABLE).unlink(missing_ok=True)

    def pool_file(self, name: str) -> Path:
        return self.dir / POOL_DIR / f"{name}.msgpack"

    def save_snapshot(self, name: str, host_params: Any, dropped: list[str] = ()) -> None:
        write_atomic(self.pool_file(name), flax.serialization.to_bytes(host_params))
        self.stale += list(dropped)

    def write_table(self) -> None:
        lg = self.league
        table = {"members": [{"member": i, "role": r, "weights": lg.weights(i)} for i, r in enumerate(lg.roles)],
                 "files": {n: f"{POOL_DIR}/{n}.msgpack" for n in lg.snapshots}}
        write_atomic(self.dir / TABLE, json.dumps(table).encode())
        for name in self.stale:
            self.pool_file(name).unlink(missing_ok=True)
        self.stale = []

    def ratings(self, **extra: Any) -> dict[str, Any]:
        lg = self.league
        line = {**extra, "elo": [round(lg.elo.rating(player(i)), 2) for i in range(len(lg.roles))],
                "snapshots": {n: round(lg.elo.rating(n), 2) for n in lg.snapshots}}
        self._append("ratings.jsonl", line)
        return line

    def bot_rows(self, rows: list[dict[str, Any]], **extra: Any) -> None:
        for row in rows:
            row.update(extra)
            with open(self.dir.parent / "eval.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"[{self.trial}] league member {extra.get('member')} ({extra.get('role')}) at update "
                  f"{extra.get('version')}: vs {row['opponent']} over {row['games']} games: win {row['win_rate']:.1%}, "
                  f"draw {row['draw_rate']:.1%}, loss {row['loss_rate']:.1%}", flush=True)

    def summary(self, versions: list[int], env_steps: list[int]) -> None:
        lg = self.league
        members = [{"member": i, "role": r, "elo": round(lg.elo.rating(player(i)), 2), "updates": versions[i],
                    "env_steps": env_steps[i],
                    "snapshots": [n for n, (m, _) in lg.snapshots.items() if m == i]} for i, r in enumerate(lg.roles)]
        (self.dir / "members.json").write_text(json.dumps(members, indent=2) + "\n")
        (self.dir / "matches.json").write_text(json.dumps(
            {"roles": list(lg.roles), "score": lg.matrix(), "games": lg.games()}, indent=2) + "\n")
        self.plot()
        print(f"[{self.trial}] league: " + "; ".join(
            f"member {m['member']} ({m['role']}) Elo {m['elo']:.0f} after {m['updates']} updates" for m in members)
              + f"; match matrix in {self.dir / 'matches.json'}", flush=True)

    def plot(self) -> Path | None:
        """``ratings.png``: every member's Elo over its env steps, from ``ratings.jsonl``."""
        rows = read_jsonl(self.dir / "ratings.jsonl")
        if not rows:
            return None
        series = {f"{i}: {role}": [(r["env_steps"][i], r["elo"][i]) for r in rows]
                  for i, role in enumerate(self.league.roles)}
        return plot_ratings(self.dir / "ratings.png", series, "env steps (each member's)", "Elo",
                            f"{self.trial}: league")

    def _append(self, name: str, row: dict[str, Any]) -> None:
        with open(self.dir / name, "a") as f:
            f.write(json.dumps(row) + "\n")
