"""A small two-player zero-sum OpenSpiel game's whole tree as arrays: exact values of policy pairs, the meta-strategy's
mixture as one behaviour policy, and its exploitability by OpenSpiel (PSRO's bookkeeping, ``srljax/population/psro.py``).

    tree = GameTree(game, observe=lambda state, player: env_observation)   # every history, every information state
    tables = [tree.table(probs_of_policy_i) for ...]   # [K, A] action probabilities per information state
    payoff = tree.payoff(tables)                        # [P, P]: policy i's mean return against j, seats alternated
    mixed = tree.mixture(tables, sigma)                 # the mixture as one behaviour policy (realization weights)
    tree.exploitability(mixed)                          # open_spiel.python.algorithms.exploitability (NashConv / 2)

A *table* holds a row of action probabilities for every information state of either player (``tree.obs[k]`` is
what that player's network sees there; ``tree.player[k]`` who acts), 0 on illegal actions. A policy plays both
seats: ``payoff[i, j] = (V(i, j) - V(j, i)) / 2`` with ``V(a, b)`` seat 0's expected return when ``a`` sits there
and ``b`` in seat 1, so the meta-game is symmetric (``payoff = -payoff.T``). Mixing policies by drawing one per game
is not the same behaviour as averaging their action probabilities at each information state; ``mixture`` weighs
each policy's probabilities there by ``sigma_i`` times the probability its own earlier actions reach it, which plays
exactly as the draw does (for games of perfect recall, as OpenSpiel's poker games are). Values are computed depth by
depth over the arrays (``[P, nodes]`` reach probabilities), so Leduc poker's 9,457 histories and dozens of policies
take milliseconds.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


class GameTree:
    """Every history of ``game`` (see the module docstring); ``observe(state, player)``: the network's input;
    ``ValueError`` past ``max_nodes`` histories."""

    def __init__(self, game: Any, observe: Callable[[Any, int], np.ndarray], max_nodes: int = 1_000_000):
        self.game = game
        self.num_actions = game.num_distinct_actions()
        keys: dict[str, int] = {}
        obs: list[np.ndarray] = []
        player: list[int] = []
        legal: list[np.ndarray] = []
        first: list[int] = []  # an information state -> one of its nodes (perfect recall: any has its own reach)
        parent, depth, chance, edge_player, edge_info, edge_action = [-1], [0], [1.0], [-1], [0], [0]
        terminal: list[tuple[int, float]] = []
        stack = [(game.new_initial_state(), 0)]
        while stack:
            state, node = stack.pop()
            if len(parent) > max_nodes:
                raise ValueError(f"{game}: PSRO's exact payoffs and exploitability walk the whole game tree, and this "
                                 f"one has more than {max_nodes:,} histories; use a small game (kuhn_poker, "
                                 "leduc_poker)")
            if state.is_terminal():
                terminal.append((node, float(state.returns()[0])))
                continue
            if state.is_chance_node():
                children = [(a, p, -1, 0) for a, p in state.chance_outcomes()]  # edge_action unused: 0
            else:
                who = state.current_player()
                key = state.information_state_string(who)
                if key not in keys:
                    keys[key] = len(keys)
                    obs.append(np.asarray(observe(state, who), np.float32))
                    player.append(who)
                    mask = np.zeros(self.num_actions, bool)
                    mask[state.legal_actions()] = True
                    legal.append(mask)
                    first.append(node)
                children = [(a, 1.0, who, keys[key]) for a in state.legal_actions()]
            for action, prob, who, info in children:
                parent.append(node)
                depth.append(depth[node] + 1)
                chance.append(prob)
                edge_player.append(who)
                edge_info.append(info)
                edge_action.append(action if who >= 0 else 0)
                stack.append((state.child(action), len(parent) - 1))
        self.keys = list(keys)
        self.obs = np.stack(obs)
        self.player = np.asarray(player)
        self.legal = np.stack(legal)
        self.first = np.asarray(first)
        self.parent = np.asarray(parent)
        self.edge_player = np.asarray(edge_player)
        self.edge_info = np.asarray(edge_info)
        self.edge_action = np.asarray(edge_action)
        depth_arr = np.asarray(depth)
        self.levels = [np.flatnonzero(depth_arr == d) for d in range(1, int(depth_arr.max()) + 1)]
        chance_reach = np.ones(len(parent))
        chance_arr = np.asarray(chance)
        for idx in self.levels:
            chance_reach[idx] = chance_reach[self.parent[idx]] * chance_arr[idx]
        self.terminals = np.asarray([n for n, _ in terminal])
        self.weight = chance_reach[self.terminals] * np.asarray([u for _, u in terminal])  # chance x seat 0's return

    @property
    def num_nodes(self) -> int:
        return len(self.parent)

    def table(self, probs: np.ndarray) -> np.ndarray:
        """``probs [K, A]`` (a network's over ``self.obs``) as a table: illegal actions 0, each row summing to 1
        (a row with no probability on a legal action: uniform over the legal ones)."""
        p = np.where(self.legal, np.asarray(probs, np.float64), 0.0)
        total = p.sum(axis=1, keepdims=True)
        uniform = self.legal / self.legal.sum(axis=1, keepdims=True)
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), uniform)

    def uniform(self) -> np.ndarray:
        return self.table(np.ones((len(self.keys), self.num_actions)))

    def own_reach(self, tables: np.ndarray, seat: int) -> np.ndarray:
        """``[P, nodes]``: the product of seat ``seat``'s action probabilities on the path to each node, under each
        of ``tables [P, K, A]`` (chance and the other seat count 1)."""
        tables = np.asarray(tables, np.float64)
        reach = np.ones((len(tables), self.num_nodes))
        for idx in self.levels:
            mine = self.edge_player[idx] == seat
            factor = np.where(mine[None, :], tables[:, self.edge_info[idx], self.edge_action[idx]], 1.0)
            reach[:, idx] = reach[:, self.parent[idx]] * factor
        return reach

    def seat_values(self, tables: np.ndarray) -> np.ndarray:
        """``V [P, P]``: seat 0's expected return with policy ``i`` in seat 0 and policy ``j`` in seat 1."""
        r0 = self.own_reach(tables, 0)[:, self.terminals]
        r1 = self.own_reach(tables, 1)[:, self.terminals]
        return (r0 * self.weight[None, :]) @ r1.T

    def payoff(self, tables: np.ndarray) -> np.ndarray:
        """The symmetric meta-game ``[P, P]``: policy i's mean return against policy j over both seats."""
        v = self.seat_values(tables)
        return 0.5 * (v - v.T)

    def mixture(self, tables: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """The behaviour policy (a table) that plays as drawing policy ``i`` with probability ``sigma[i]`` for the
        whole game: at each information state the policies' rows weighted by ``sigma`` times their own reach."""
        tables = np.asarray(tables, np.float64)
        sigma = np.asarray(sigma, np.float64)
        weights = np.zeros((len(tables), len(self.keys)))
        for seat in (0, 1):
            mine = self.player == seat
            weights[:, mine] = self.own_reach(tables, seat)[:, self.first[mine]]
        weights *= sigma[:, None]
        total = weights.sum(axis=0)
        fallback = np.broadcast_to(sigma[:, None], weights.shape)  # unreachable by all: sigma's average
        weights = np.where(total[None, :] > 0, weights, fallback)
        mixed = np.einsum("pk,pka->ka", weights, tables)
        return self.table(mixed)

    def openspiel_policy(self, table: np.ndarray) -> Any:
        """``table`` as OpenSpiel's ``TabularPolicy`` (its rows by information-state string)."""
        from open_spiel.python import policy as openspiel_policy

        tabular = openspiel_policy.TabularPolicy(self.game)
        for k, key in enumerate(self.keys):
            tabular.action_probability_array[tabular.state_lookup[key]] = table[k]
        return tabular

    def exploitability(self, table: np.ndarray) -> float:
        """OpenSpiel's exploitability of ``table`` played in both seats: the mean over the two seats of what a best
        response gains against it (NashConv / 2; 0 at a Nash equilibrium)."""
        from open_spiel.python.algorithms import exploitability

        return float(exploitability.exploitability(self.game, self.openspiel_policy(table)))
