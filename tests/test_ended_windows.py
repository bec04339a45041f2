"""``bench/ended_windows.py``: the episodes ended in each window, recovered from srljax's running means, equal the
direct per-window means JaxMARL's json gives for the same episodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import ended_windows


def _run(tmp_path, returns_per_update: list[list[float]], window: int):
    (tmp_path / "config.json").write_text(json.dumps({"log": {"window": window}}))
    seen: list[float] = []
    lines = []
    for u, rets in enumerate(returns_per_update, 1):
        seen += rets
        tail = seen[-window:]
        lines.append({"update": u, "env_steps": 100 * u, "episodes": len(seen),
                      "episode_return": float(np.mean(tail)) if tail else 0.0})
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return str(tmp_path / "metrics.jsonl")


def test_ours_matches_direct_sums(tmp_path, capsys):
    rng = np.random.default_rng(0)
    per_update = [list(rng.integers(0, 25, size=n).astype(float)) for n in (3, 0, 7, 2, 9, 4)]
    path = _run(tmp_path, per_update, window=10_000)
    steps, eps, tot = ended_windows.ours_per_update(path)
    assert steps == 100
    np.testing.assert_array_equal(eps, [len(r) for r in per_update])
    np.testing.assert_allclose(tot, [sum(r) for r in per_update], atol=1e-9)
    jm = tmp_path / "jm.json"
    jm.write_text(json.dumps({"seeds": [1], "steps_per_update": 100, "episodes": [eps.tolist()],
                              "return_sum": [tot.tolist()]}))
    assert ended_windows.main(["--ours", path, "--jaxmarl", str(jm), "--every", "300", "--last", "2"]) == 0
    out = capsys.readouterr().out
    first = sum(sum(r) for r in per_update[:3]) / sum(len(r) for r in per_update[:3])
    last = sum(sum(r) for r in per_update[-2:]) / sum(len(r) for r in per_update[-2:])
    row = next(line for line in out.splitlines() if line.startswith("| 300 (3)"))
    assert row.count(f"{first:.2f} (10)") == 2  # both columns, the same figure
    assert out.count(f"**{last:.2f}** (13)") == 2


def test_small_window_refused(tmp_path):
    path = _run(tmp_path, [[1.0] * 5, [2.0] * 5], window=4)
    with pytest.raises(SystemExit, match="log.window=4"):
        ended_windows.ours_per_update(path)
