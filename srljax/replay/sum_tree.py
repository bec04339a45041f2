"""A sum-tree over ``capacity`` non-negative weights, vectorised over batches with numpy.

    tree = SumTree(1_000_000)
    tree.set(np.array([3, 7]), np.array([0.5, 2.0]))      # batch update: leaves, then each level once
    slots = tree.find(rng.random(512) * tree.total)        # batch prefix-sum search, one pass per level
    tree.get(slots) / tree.total                           # the probability each was drawn with

Proportional prioritisation (Schaul et al. 2016) draws slot i with probability ``w_i / sum(w)``:
``find(u)`` returns the slot whose prefix-sum interval ``[sum(w_<i), sum(w_<=i))`` holds ``u``.
Both operations loop over the tree's levels and never over the batch. Each node has ``branching``
children (16 by default), so a million slots take 5 levels instead of a binary tree's 20: a level
costs a handful of numpy calls whatever its width, and the replay updates a few slots per inserted
row. Nodes are recomputed from their children rather than adjusted by differences, so no rounding
error accumulates however many updates a run makes, and an all-zero subtree sums to exactly 0.
float64 throughout.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    def __init__(self, capacity: int, branching: int = 16):
        if capacity < 1 or branching < 2:
            raise ValueError(f"SumTree capacity={capacity} must be >= 1 and branching={branching} >= 2")
        self.capacity, self.branching = capacity, branching
        self.levels: list[np.ndarray] = []  # leaves first, root ([1]) last; each level but the root a multiple of b
        size = capacity
        while True:
            padded = -(-size // branching) * branching
            self.levels.append(np.zeros(padded, np.float64))
            size = padded // branching
            if size == 1:
                break
        self.levels.append(np.zeros(1, np.float64))

    @property
    def total(self) -> float:
        return float(self.levels[-1][0])

    def get(self, slots: np.ndarray) -> np.ndarray:
        return self.levels[0][np.asarray(slots)]

    def set(self, slots: np.ndarray, weights: np.ndarray) -> None:
        """Set the weights of ``slots`` (int [K]) to ``weights`` ([K], >= 0); a slot repeated takes its last weight."""
        slots = np.asarray(slots, np.int64)
        weights = np.asarray(weights, np.float64)
        if slots.size == 0:
            return
        if slots.min() < 0 or slots.max() >= self.capacity:
            raise IndexError(f"SumTree slots must be in [0, {self.capacity}); got {slots.min()}..{slots.max()}")
        if not np.all(weights >= 0) or not np.all(np.isfinite(weights)):
            raise ValueError("SumTree weights must be finite and >= 0")
        self.levels[0][slots] = weights
        nodes, b = slots, self.branching
        for below, level in zip(self.levels[:-1], self.levels[1:]):
            # A parent listed twice is written twice with the same sum: its children are final by now.
            nodes = nodes // b
            level[nodes] = below.reshape(-1, b)[nodes].sum(axis=1)

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """Slots whose prefix-sum intervals hold ``prefix`` (float [K], in ``[0, total)``).

        Never returns a zero-weight slot while the total is positive: a child of weight 0 is never
        entered, so a value rounded onto an interval's edge lands in a positive neighbour.
        """
        if self.total <= 0:
            raise ValueError("SumTree.find on an empty tree (total weight 0)")
        u = np.asarray(prefix, np.float64).copy()
        nodes = np.zeros(u.shape, np.int64)
        rows = np.arange(u.size)
        b = self.branching
        for level in reversed(self.levels[:-1]):
            children = level.reshape(-1, b)[nodes]  # [K, b]
            ends = np.cumsum(children, axis=1)
            positive = children > 0
            inside = (u[:, None] < ends) & positive
            last_positive = b - 1 - np.argmax(positive[:, ::-1], axis=1)  # where u rounded past the last edge
            child = np.where(inside.any(axis=1), np.argmax(inside, axis=1), last_positive)
            u = u - (ends[rows, child] - children[rows, child])
            nodes = nodes * b + child
        return nodes
