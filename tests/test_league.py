"""The self-play league: each role's opponent rule against its formula, the match matrix and Elo, the results wire,
refusals, and short leagues in one process and as a worker graph (local processes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from srljax.comm.codec import encode
from srljax.config import apply_overrides, load_file, problems
from srljax.selfplay.league import EXPLOITER_FLOOR, League
from srljax.selfplay.pool import LATEST

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs/connect_four_league.py"


def played(league: League, member: int, opponent: str, wins: int, games: int) -> None:
    for g in range(games):
        league.record(member, opponent, 1.0 if g < wins else 0.0)


def test_each_role_draws_opponents_by_its_formula():
    league = League(("main", "main_exploiter", "league_exploiter"), pool_size=2, pfsp_power=2.0, latest_share=0.35)
    assert league.weights(0) == {LATEST: 1.0} and league.weights(1) == {LATEST: 1.0}  # nothing to draw yet
    names = [league.snapshot(m, v)[0] for v in (0, 10) for m in range(3)]
    assert league.snapshot(0, 20) == ("m0-v20", ["m0-v0"])  # bounded per member: its oldest leaves
    names = [n for n in names if n != "m0-v0"] + ["m0-v20"]
    assert list(league.snapshots) == ["m1-v0", "m2-v0", "m0-v10", "m1-v10", "m2-v10", "m0-v20"]
    played(league, 0, "m1-v0", 8, 10)  # p = (8 + 1) / (10 + 2) = 0.75
    played(league, 0, "m0-v20", 1, 10)  # p = 2 / 12
    p = np.array([league.score(0, n) for n in league.snapshots])
    assert p[0] == pytest.approx(0.75) and p[-1] == pytest.approx(2 / 12) and p[1] == 0.5
    want = 0.65 * (1 - p) ** 2 / ((1 - p) ** 2).sum()
    main = league.weights(0)
    np.testing.assert_allclose([main[n] for n in league.snapshots], want)
    assert main[LATEST] == pytest.approx(0.35) and sum(main.values()) == pytest.approx(1.0)
    # the league exploiter: the same PFSP over every snapshot, never itself
    played(league, 2, "m0-v10", 3, 4)
    q = np.array([league.score(2, n) for n in league.snapshots])
    exploiter = league.weights(2)
    assert LATEST not in exploiter
    np.testing.assert_allclose([exploiter[n] for n in league.snapshots], (1 - q) ** 2 / ((1 - q) ** 2).sum())
    # the main exploiter: the main agent's newest snapshot while it beats it at all ...
    assert league.weights(1) == {"m0-v20": 1.0}
    played(league, 1, "m0-v20", 0, 20)  # ... and its older ones by p (1 - p) once it scores <= the floor
    assert league.score(1, "m0-v20") <= EXPLOITER_FLOOR
    played(league, 1, "m0-v10", 3, 6)
    r = np.array([league.score(1, n) for n in ("m0-v10", "m0-v20")])
    w = r * (1 - r) / (r * (1 - r)).sum()
    assert league.weights(1) == pytest.approx({"m0-v10": w[0], "m0-v20": w[1]})


def test_the_match_matrix_and_elo_follow_the_games():
    league = League(("main", "league_exploiter"), elo_k=16.0)
    league.snapshot(0, 0)
    league.snapshot(1, 0)
    league.record(0, "m1-v0", 1.0)  # 1200 vs 1200: +8 / -8
    assert league.elo.rating("m0") == pytest.approx(1208.0) and league.elo.rating("m1-v0") == pytest.approx(1192.0)
    league.record(0, LATEST, 0.0)  # against itself: the matrix counts it, Elo does not move
    league.record(1, "m0-v0", 0.5)
    e = 1 / (1 + 10 ** ((1200.0 - 1200.0) / 400))
    assert league.elo.rating("m1") == pytest.approx(1200.0 + 16 * (0.5 - e))
    assert league.matrix() == [[0.0, 1.0], [0.5, None]]
    assert league.games() == [[1, 1], [1, 0]]
    with pytest.raises(ValueError, match="must be in"):
        league.record(0, "m1-v0", 2.0)


def test_league_opponent_keeps_each_games_opponent_and_draws_by_the_weights():
    import jax.numpy as jnp

    from srljax.selfplay.league_opponent import LeagueOpponent

    class Spec:
        num_envs, obs_shape, legal_actions = 64, (3,), (0, 3)

    class Algo:
        @staticmethod
        def act(params, obs, state, first, key):  # an opponent that always plays its own number
            return jnp.full(obs.shape[0], params["a"], jnp.int32), {}, state

    weights = {"m0-v0": 0.5, "m1-v0": 0.25, LATEST: 0.25}
    reported = []
    opp = LeagueOpponent(Algo, Spec, 0, weights=lambda: weights, params_of=lambda n: {"a": np.int32(int(n[1]) + 1)},
                         report=lambda n, s: reported.append((n, s)))
    opp.set_current({"a": np.int32(9)}, 3)
    for i in range(64):
        opp.begin(i)
    counts = opp.playing()
    assert sum(counts.values()) == 64 and abs(counts["m0-v0"] - 32) < 14 and counts.get(LATEST, 0) > 4
    actions = opp.act(np.zeros((64, 3), np.float32), np.arange(64, dtype=np.int32))
    want = {"m0-v0": 1, "m1-v0": 2, LATEST: 9}
    assert actions.tolist() == [want[n] for n in opp.assigned]
    weights.clear()
    weights["m1-v0"] = 1.0  # the table changed: games already going keep their opponent
    assert opp.act(np.zeros((2, 3), np.float32), np.array([0, 1], np.int32)).tolist() == [want[n] for n in
                                                                                       opp.assigned[:2]]
    opp.end(5, 1.0)
    assert reported == [(opp.assigned[5], 1.0)]


def test_malformed_results_are_counted_not_raised():
    import zmq

    from srljax.comm.results import KIND_RESULTS, Results, ResultsReceiver, ResultsSender

    receiver = ResultsReceiver("tcp://127.0.0.1:*", trial="t/0", members=3)
    sender = ResultsSender(receiver.address, trial="t/0")
    raw = zmq.Context.instance().socket(zmq.PUSH)
    raw.connect(receiver.address)
    try:
        for meta in ({"member": 3, "opponents": [], "scores": []}, {"member": 0, "opponents": ["x"], "scores": [1.0]},
                     {"member": 0, "opponents": ["m1-v0"], "scores": [1.5]},
                     {"member": 0, "opponents": ["m1-v0", LATEST], "scores": [1.0]}):
            raw.send_multipart(encode(KIND_RESULTS, "t/0", {}, version=0, meta=meta))
        raw.send(b"not a message")
        assert sender.send(Results(1, ("m0-v10", LATEST), (1.0, 0.5)), timeout_ms=1000)
        got, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline and (not got or sum(receiver.drops.values()) < 5):  # two peers: any order
            if (one := receiver.recv(timeout_ms=100)) is not None:
                got.append(one)
        assert got == [Results(1, ("m0-v10", LATEST), (1.0, 0.5))]
        counters = receiver.counters()
        assert counters.get("drop.results") == 4 and sum(v for k, v in counters.items() if k.startswith("drop.")) == 5
    finally:
        raw.close(linger=0)
        sender.close()
        receiver.close()


def launch(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launch.local", str(CONFIG), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_bad_league_configs_exit_2_with_one_message():
    cfg = load_file(str(CONFIG))
    for overrides, text in (
            (["selfplay.league=[main,coach,main]"], "['coach'] not a league role"),
            (["selfplay.league=[main_exploiter,league_exploiter]", "layout.num_actors=2"], "has no main agent"),
            (["selfplay.sampling=uniform"], "each member's role sets how it draws"),
            (["layout.num_actors=4"], "needs layout.num_actors to be a multiple of 3"),
            (["selfplay.pool_size=0"], "selfplay.pool_size=0 must be >= 1"),
            (["eval.every_updates=10"], "the main agents are evaluated against selfplay.bots"),
            (["layout.mode=single", "layout.num_actors=1", "checkpoint.every_updates=5"], "final checkpoint only")):
        found = problems(apply_overrides(cfg, overrides))
        assert len(found) == 1 and text in found[0], (overrides, found)
    out = launch("--show", "env.options.game=2048", timeout=120)  # a one-player game in a league
    assert out.returncode == 2 and "2048' is a 1-player general_sum game" in out.stderr, out.stderr
    assert out.stderr.count("\n  - ") == 1, out.stderr


def read_league(run: Path) -> tuple[list[dict], dict, list[dict]]:
    members = json.loads((run / "league" / "members.json").read_text())
    matches = json.loads((run / "league" / "matches.json").read_text())
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    return members, matches, evals


def check_league(run: Path, updates: int) -> None:
    members, matches, evals = read_league(run)
    assert [m["role"] for m in members] == ["main", "main_exploiter", "league_exploiter"]
    assert all(m["updates"] == updates and m["snapshots"] for m in members), members
    games = np.array(matches["games"])
    assert games[0].sum() > 100 and games[2].sum() > 100, games  # the main agent and league exploiter play everyone
    # the main exploiter plays only the main agent (the games its actor's envs began at reset, before the league's
    # first table, are against itself: at most env.num_envs of them)
    assert games[1, 0] > 100 and games[1, 1] <= 16 and games[1, 2] == 0, games
    assert all(games[0, j] > 0 and games[2, j] > 0 for j in range(3)), games
    assert matches["score"][1][2] is None and 0.0 <= matches["score"][0][1] <= 1.0
    table = json.loads((run / "league" / "table.json").read_text())
    assert set(table["files"]) == {n for m in members for n in m["snapshots"]}
    assert all((run / "league" / f).exists() for f in table["files"].values())
    assert len(list((run / "league" / "pool").glob("*.msgpack"))) == len(table["files"])  # dropped ones deleted
    ratings = [json.loads(line) for line in (run / "league" / "ratings.jsonl").read_text().splitlines()]
    assert len(ratings) >= 6 and len(ratings[-1]["elo"]) == 3 and (run / "league" / "ratings.png").exists()
    (row,) = [r for r in evals if r.get("final")]
    assert row["member"] == 0 and row["role"] == "main" and row["opponent"] == "random" and row["games"] == 20


SHORT = ["env.options.game=tic_tac_toe", "env.num_envs=16", "total_env_steps=25000", "selfplay.snapshot_every=5",
         "selfplay.pool_size=3", "selfplay.bots=[random]", "selfplay.bot_games=20", "log.wandb=disabled",
         "log.progress=lines"]


def test_league_in_one_process_writes_members_ratings_and_matches(tmp_path):
    out = launch(*SHORT, "layout.mode=single", "layout.num_actors=1", f"log.run_root={tmp_path}", "-f", "one")
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "connect_four_league" / "one"
    check_league(run, updates=24)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {(r["member"], r["role"]) for r in lines} == {(0, "main"), (1, "main_exploiter"), (2, "league_exploiter")}
    assert all((run / "members" / str(i) / "checkpoints").is_dir() for i in range(3))


def test_league_as_a_worker_graph_of_local_processes(tmp_path):
    out = launch(*SHORT, f"log.run_root={tmp_path}", "-f", "graph")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = tmp_path / "connect_four_league" / "graph"
    check_league(run, updates=24)
    assert "league done" in (run / "logs" / "league-0.log").read_text()
    summary = out.stdout.strip().splitlines()[-1]  # the members' steps summed, not the empty trial-level file's
    assert summary.startswith("finished: done, ") and ", 24 updates" in summary and "members/<i>/metrics" in summary
    assert int(summary.split(", ")[1].split()[0].replace(",", "")) >= 3 * 24 * 1024, summary
    for i in range(3):  # each actor played its own member's games and sent them to the manager
        last = json.loads((run / "workers" / f"actor-{i}.jsonl").read_text().splitlines()[-1])
        assert last["league/games"] > 100 and not last.get("league/results_dropped"), last


def test_league_in_the_threads_backend(tmp_path):
    from launch.threads import run_threads

    cfg = apply_overrides(load_file(str(CONFIG)), [*SHORT, "selfplay.bot_every_updates=0", f"log.run_root={tmp_path}"])
    result = run_threads(cfg)
    assert result.exit_code == 0, result
    check_league(cfg.run_dir, updates=24)
