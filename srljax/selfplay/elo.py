"""Elo ratings (pure arithmetic, no I/O).

    elo = Elo(k=16.0)
    elo.add("main"); elo.add("v40", rating=elo.rating("main"))    # a snapshot starts at its source's rating
    elo.update("main", "v40", score=1.0)                            # main beat v40 (0.5: draw, 0.0: loss)

``expected(a, b) = 1 / (1 + 10 ** ((R_b - R_a) / 400))``; after a game with score ``s`` for ``a``:
``R_a += k (s - E_a)`` and ``R_b += k ((1 - s) - (1 - E_a))``, so the ratings' sum is kept.
"""

from __future__ import annotations

INITIAL = 1200.0


def expected(r_a: float, r_b: float) -> float:
    """The score ``a`` (rated ``r_a``) is expected to make against ``b``."""
    return 1.0 / (1.0 + 10.0 ** ((r_b - r_a) / 400.0))


class Elo:
    """Ratings by name; every game updates both players."""

    def __init__(self, k: float = 16.0):
        if k <= 0:
            raise ValueError(f"Elo k={k} must be > 0")
        self.k = k
        self.ratings: dict[str, float] = {}

    def add(self, name: str, rating: float = INITIAL) -> None:
        self.ratings.setdefault(name, float(rating))

    def rating(self, name: str) -> float:
        return self.ratings.get(name, INITIAL)

    def update(self, a: str, b: str, score: float) -> None:
        """``a`` scored ``score`` (1 win, 0.5 draw, 0 loss) against ``b``."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score={score} must be in [0, 1]")
        self.add(a)
        self.add(b)
        e = expected(self.ratings[a], self.ratings[b])
        self.ratings[a] += self.k * (score - e)
        self.ratings[b] -= self.k * (score - e)
